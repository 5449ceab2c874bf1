// What every child npu_run starts gets between fork and exec, and the one way to start a helper
// process that is not a worker (ssh, for a launch over ssh).
#pragma once

#include <signal.h>
#include <sys/types.h>

#include <boost/core/noncopyable.hpp>
#include <boost/system/error_code.hpp>
#include <string>
#include <vector>

namespace boost::asio {
class io_context;
}

namespace npu_run {

// Blocks every signal of this thread for a scope: around fork, so that the child starts with
// none pending against the parent's handlers (restore_signals_in_child resets them first).
class AllSignalsBlocked : boost::noncopyable {
 public:
  AllSignalsBlocked();
  ~AllSignalsBlocked();

 private:
  sigset_t saved_{};
};

// In the child, before exec: every handler back to its default (Asio's would write to the
// parent's signal pipe; SIGPIPE and SIGTTIN, which npu_run ignores for itself, too), then no
// signal blocked. Async-signal-safe.
void restore_signals_in_child();

// Starts `program` (found on PATH unless it has a '/') with `args` and the given stdio
// descriptors (the caller closes its copies), in a process group of its own, so that a
// terminal's Ctrl-C reaches only npu_run, which decides; it gets SIGTERM if npu_run dies, and
// no descriptor of npu_run's beyond stdio. Returns its pid, or 0 with `ec` set. The caller
// reaps it (ChildExits). `envp` (execve's form): its environment; null: npu_run's.
pid_t spawn_helper(boost::asio::io_context& io, const std::string& program,
                   const std::vector<std::string>& args, int in_fd, int out_fd, int err_fd,
                   boost::system::error_code& ec, const char* const* envp = nullptr);

// Whether `pid` is a helper spawn_helper started and nobody has reaped yet: the sweep for
// escaped processes (workers/escaped_processes.hpp) leaves helpers alone.
bool is_helper_process(pid_t pid);
// The helper has been reaped.
void forget_helper_process(pid_t pid);

}  // namespace npu_run
