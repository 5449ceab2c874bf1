// What the node checks need from this host: the tools' places (PATH from the agent's
// environment, then Ascend's standard places), the kind of devices, and a way to name a pid that
// npu-smi lists without a name (inside a container); and a blocking run for `npu_run doctor
// --devices`, which has no loop of its own.
#pragma once

#include <string>
#include <vector>

#include "agent/health/health_runner.hpp"
#include "basics/environment.hpp"
#include "devices/device_discovery.hpp"
#include "health/node_checks.hpp"

namespace npu_run {

struct NodeHealthOptions {
  std::string host;
  DeviceKind kind = DeviceKind::kNone;
  std::vector<int> devices;  // physical ids
  std::string user_check;    // --health-check-cmd
  int flap_window_min = 10;  // --health-flap-window
};

NodeCheckSettings node_check_settings(const EnvMap& env, const NodeHealthOptions& options);

// "python3 train.py --lr 0.1" from /proc/PID/cmdline; "" when it cannot be read.
std::string command_of_pid(long pid);

// Runs the checks on a loop of its own and returns the verdict (`npu_run doctor --devices`).
NodeVerdict run_node_checks(const NodeCheckSettings& checks, const HealthRunSettings& settings);

}  // namespace npu_run
