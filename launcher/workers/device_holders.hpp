// Who holds a device open: before a node starts an attempt, its devices must be free, or the
// new workers fail with "device busy" (an NPU takes one process per device). Found from every
// /proc/<pid>/fd link, as fuser does; the shared control nodes (/dev/davinci_manager,
// /dev/devmm_svm, /dev/nvidiactl, /dev/nvidia-uvm) are never asked about, only a device's own
// node (/dev/davinciN, /dev/nvidiaN).
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace npu_run {

struct DeviceHolder {
  pid_t pid = -1;
  std::string device;   // the path it holds
  std::string command;  // its command line, shortened
  bool ours = false;    // the job's: it carries this agent's mark, or is this agent's child
};

struct HolderSearch {
  std::vector<std::string> devices;  // the device nodes, as the links name them
  std::string mark;                  // "NPU_RUN_AGENT_MARK=<mark>"; empty: none
  pid_t self = 0;                    // this agent: itself never counts, its children are ours
  std::string proc_root = "/proc";
};

// Every process (one row per device it holds) that has one of the devices open.
std::vector<DeviceHolder> find_device_holders(const HolderSearch& search);

// A holder another source named (npu-smi's process rows, which see what /proc cannot: a
// process in another container), judged as find_device_holders() judges its own.
DeviceHolder reported_holder(const HolderSearch& search, pid_t pid, const std::string& device,
                             const std::string& reported_name);

// The device nodes of these physical devices under `dev_root` ($NPU_RUN_DEV_ROOT, else /dev):
// davinciN where the root has any davinci node, else nvidiaN.
std::vector<std::string> device_nodes(const std::string& dev_root, const std::vector<int>& devices);

// "device /dev/davinci0 is held by pid 42 (python3 old.py)", for logs and failures.
std::string describe(const DeviceHolder& holder);

}  // namespace npu_run
