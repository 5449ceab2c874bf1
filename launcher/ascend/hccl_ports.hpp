// HCCL's host ports: HCCL_IF_BASE_PORT (default 60000) and the ports after it, 32 in all in newer
// CANN versions (16 in older ones). Nothing else of the job may take them, so the doctor checks
// that they are reserved and the agent never hands one to the workers.
#pragma once

#include "basics/environment.hpp"
#include "basics/port_range.hpp"

namespace npu_run {

inline constexpr int kHcclDefaultBasePort = 60000;
inline constexpr int kHcclPortCount = 32;

// The range for HCCL_IF_BASE_PORT in `env`; unset or malformed means HCCL's default base.
PortRange hccl_ports(const EnvMap& env);

}  // namespace npu_run
