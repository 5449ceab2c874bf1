// --numa-binding (torchrun 2.x): which CPUs, and which memory node, each worker is bound to,
// from the device it runs on. Read from sysfs as torch/numa/binding.py reads it: the device's
// PCI function gives its NUMA node (bus/pci/devices/<addr>/numa_node; -1 means 0), the node its
// CPUs (devices/system/node/node<N>/cpulist), and cpu<N>/topology and cpu<N>/cache the sockets,
// physical cores and last-level caches. Devices are the PCI functions of their kind in address
// order (Huawei 19e5 processing accelerators for NPUs, NVIDIA 10de display controllers for GPUs):
// physical id i is the i-th. The sysfs root is $NPU_RUN_SYS_ROOT when set (tests point it at a
// fake tree), else /sys.
#pragma once

#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "devices/device_discovery.hpp"

namespace npu_run {

enum class NumaMode {
  kNode,         // every CPU of the device's NUMA node
  kSocket,       // every CPU of the NUMA nodes of the device's socket
  kExclusive,    // the node's physical cores split evenly among the devices on that node
  kCoreComplex,  // one last-level-cache group of the node per device, round robin
};

std::optional<NumaMode> parse_numa_mode(std::string_view text);
inline constexpr const char* kNumaModeChoices = "{node,socket,exclusive,core-complex}";

struct NumaPlacement {
  int node = 0;           // memory is preferred from here
  std::vector<int> cpus;  // sorted logical CPU ids
};

// One placement per entry of `devices` (physical ids), among `allowed` CPUs (the agent's own
// affinity). Throws std::runtime_error saying what is missing in sysfs.
std::vector<NumaPlacement> plan_numa_binding(NumaMode mode, DeviceKind kind,
                                             const std::vector<int>& devices,
                                             const std::string& sys_root,
                                             const std::set<int>& allowed);

// msrun --bind_core True on a host without devices: `allowed` split into `workers` contiguous
// shares as even as can be (a CPU is shared only when there are fewer CPUs than workers), no
// memory node preferred (node -1).
std::vector<NumaPlacement> split_cpus_evenly(const std::set<int>& allowed, int workers);

// Logical CPUs this process may run on.
std::set<int> allowed_cpus();

// "0-3,8" -> {0,1,2,3,8} (sysfs cpu lists); throws std::runtime_error when malformed.
std::set<int> parse_cpu_list(std::string_view text);

}  // namespace npu_run
