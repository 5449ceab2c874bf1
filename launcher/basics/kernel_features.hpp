// What the running kernel offers among the system calls npu_run would like to use, probed once
// at run time. One binary runs on every kernel from Linux 3.10 (CentOS 7) on: each newer call
// has a fallback, and this is the one place that decides which path is taken.
#pragma once

#include <string>

namespace npu_run {

struct KernelFeatures {
  std::string release;               // uname -r
  bool pidfd_open = false;           // Linux 5.3: a child's or the parent's exit as a readable fd
  bool clone3 = false;               // Linux 5.3: glibc's threads and spawns fall back to clone
  bool close_range = false;          // Linux 5.9: close every descriptor above N in one call
  bool close_range_cloexec = false;  // Linux 5.11: mark them close-on-exec in one call
  bool getrandom = false;  // Linux 3.17: libcrypto and libstdc++ fall back to /dev/urandom
};

// Probed on first use (thread-safe), then cached for the life of the process.
const KernelFeatures& kernel_features();

// "6.1.0 (pidfd_open yes, clone3 yes, close_range yes, getrandom yes)", for --version.
std::string describe_kernel(const KernelFeatures& features);

}  // namespace npu_run
