// Finds the accelerators of this host for `--nproc-per-node auto`: Ascend NPUs first
// (/dev/davinciN), then NVIDIA GPUs (/dev/nvidiaN). The device root is $NPU_RUN_DEV_ROOT when
// set (tests point it at fake trees), else /dev.
#pragma once

#include <string>
#include <vector>

#include "basics/environment.hpp"

namespace npu_run {

enum class DeviceKind { kNone, kAscend, kNvidia };

struct DiscoveredDevices {
  DeviceKind kind = DeviceKind::kNone;
  // Physical ids in logical order: logical id i (what the framework calls device i) is
  // physical_ids[i]. Visible-device variables restrict and reorder them.
  std::vector<int> physical_ids;
  std::string description;  // e.g. "4 Ascend NPUs in /dev (ASCEND_RT_VISIBLE_DEVICES=0,1,2,3)"
};

DiscoveredDevices discover_devices(const EnvMap& env);

// Numbers N of the entries named <prefix>N in `dir`, sorted; other names are ignored
// (so davinci_manager and nvidiactl do not count).
std::vector<int> numbered_device_nodes(const std::string& dir, const std::string& prefix);

}  // namespace npu_run
