// What a worker's child does between fork and exec (a Boost.Process v2 initializer): its own
// process group, the parent-death signal, the guardian's registration, --numa-binding's CPUs
// and preferred memory node, close-on-exec for everything beyond stdio, default signals.
// Only async-signal-safe calls; on failure the launcher reports errno to the parent.
#pragma once

#include <sched.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <filesystem>

#include "workers/boost_process.hpp"
#include "workers/child_setup.hpp"

namespace npu_run {

// set_mempolicy(2) without libnuma's header: MPOL_PREFERRED, and a mask as wide as the one the
// worker's placement fills.
constexpr int kPreferredMemoryPolicy = 1;
constexpr unsigned long kMemoryMaskBits = 1024;
using MemoryMask = std::array<unsigned long, kMemoryMaskBits / (8 * sizeof(unsigned long))>;

struct WorkerProcessSetup {
  using error_code = boost::process::v2::error_code;
  pid_t agent_pid;
  int guardian_fd;              // -1: no guardian
  const cpu_set_t* cpus;        // nullptr: the agent's affinity
  const unsigned long* memory;  // nullptr: the default policy; else a one-node mask
  bool close_range_cloexec;     // kernel_features(), read before fork

  template <typename Launcher>
  error_code on_exec_setup(Launcher&, const std::filesystem::path&, const char* const*) {
    // Own process group: the agent signals the worker and everything it starts as one, and a
    // terminal's Ctrl-C reaches only the agent, which then decides.
    if (::setpgid(0, 0) != 0) return error_code(errno, boost::system::system_category());
    if (::prctl(PR_SET_PDEATHSIG, SIGKILL) != 0)
      return error_code(errno, boost::system::system_category());
    // The agent may have died between fork and prctl; then no death signal would ever come.
    if (::getppid() != agent_pid) {
      errno = ESRCH;
      return error_code(ESRCH, boost::system::system_category());
    }
    // Register with the guardian here, before exec, i.e. before user code can start children.
    if (guardian_fd >= 0) {
      const int32_t group = static_cast<int32_t>(::getpid());
      if (::write(guardian_fd, &group, sizeof(group)) != static_cast<ssize_t>(sizeof(group))) {
        return error_code(errno, boost::system::system_category());
      }
    }
    // --numa-binding, before exec so that every thread the worker starts inherits it.
    if (cpus != nullptr && ::sched_setaffinity(0, sizeof(cpu_set_t), cpus) != 0)
      return error_code(errno, boost::system::system_category());
    // Memory is preferred from the device's node, not bound to it: a full node spills over
    // instead of failing the worker. Best effort: a kernel without NUMA support (ENOSYS) or a
    // node it does not know (EINVAL) leaves the default policy.
    if (memory != nullptr)
      (void)::syscall(SYS_set_mempolicy, kPreferredMemoryPolicy, memory, kMemoryMaskBits);
    // Nothing of the agent's beyond stdio reaches the worker, whatever opened it and however
    // (a worker's daemon holding the rendezvous port or the held port would outlive the job).
    set_cloexec_from_in_child(3, close_range_cloexec);
    // The agent forked with every signal blocked. Its handlers (Asio's, which write to the
    // agent's signal pipe) must not run here for a signal meant for this worker: back to the
    // defaults, as posix_spawn does, then unblocked.
    restore_signals_in_child();
    return {};
  }
};

}  // namespace npu_run
