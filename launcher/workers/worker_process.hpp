// One worker's process: its output (log files, relays to the console), the spawn with what the
// child does before exec, and how it ended. It does what it is told; when to start, stop and
// kill the workers of an attempt is WorkerGroup's policy (worker_group.cpp).
//
// The spawn: Boost.Process v2's fork_and_forget_launcher, so the agent never waits for an exec
// (ExecReport says later whether it happened); Boost's own pidfd is compiled out (its
// constructor throws before Linux 5.3) and its handle detached at once, ChildExits reaps. The
// launcher is handed an io_context that never runs: Asio's fork notification would otherwise
// make every child rebuild the agent's epoll set before exec. Signals are blocked around fork.
// Between fork and exec, async-signal-safe only (child_setup.hpp): its own process group (the
// parent calls setpgid too, as shells do, so a stop signalled early is not lost),
// PR_SET_PDEATHSIG, a check that the agent did not die first, the signal mask and handlers
// reset, --numa-binding's CPUs and preferred memory node, every descriptor from 3 up
// close-on-exec. When its first process ends, its process group is SIGKILLed at once: leftovers
// go with it, before the group id can be reused (pid_max may be 32768). Exits are decoded from
// the raw wait status, since Boost's reports exit code and signal number in one int.
#pragma once

#include <sys/types.h>

#include <boost/system/error_code.hpp>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "workers/group_result.hpp"
#include "workers/worker_spec.hpp"

namespace boost::asio {
class io_context;
}

namespace npu_run {

class ExecReport;
class Guardian;
class OutputRelay;

class WorkerProcess {
 public:
  WorkerProcess(boost::asio::io_context& io, WorkerSpec spec);
  // A worker still running is killed with its process group: never left behind, even when the
  // agent is torn down by an exception.
  ~WorkerProcess();
  WorkerProcess(const WorkerProcess&) = delete;
  WorkerProcess& operator=(const WorkerProcess&) = delete;

  // Creates the log directory, opens the output and forks, without waiting for the exec (its
  // outcome is read when the process ends). `spawn_context` is handed to Boost's launcher and
  // never run. False when no process was started; the outcome says why, and it is logged.
  bool spawn(boost::asio::io_context& spawn_context, Guardian* guardian);

  // Records the end ChildExits observed, and kills whatever the worker left in its group.
  void ended(boost::system::error_code ec, int wait_status, bool stopped_by_agent,
             Guardian* guardian);
  // Marks a worker that is never started, because of another's failure.
  void not_started(int err, std::string why);
  // Stops waiting for a worker that SIGKILL did not end (uninterruptible sleep).
  void abandon();
  // Sends `sig` to the worker's process group while it runs.
  void signal(int sig) const;
  // Drains what its relays still hold, then reads what its output and files say of its end
  // (lost log lines, when it raised its error, a stack dump) and runs `settled`: outcome() is
  // final from then on.
  void settle(std::function<void()> settled);

  bool running() const { return running_; }
  pid_t pid() const { return outcome_.pid; }
  const WorkerSpec& spec() const { return spec_; }
  const WorkerOutcome& outcome() const { return outcome_; }

 private:
  // The one path for a worker that cannot start: status, reason, one log line; returns false.
  bool cannot_start(int err, std::string why);
  // The child's stdin, stdout and stderr, and what the agent closes once it has forked.
  struct Stdio {
    int in = -1;
    int out = -1;
    int err = -1;
    std::vector<int> to_close;
  };
  // Opens them (and the log directory); false, after cannot_start(), when one cannot be.
  bool open_stdio(Stdio& stdio);
  int open_sink(const StreamRoute& route, int console_fd, std::vector<int>& to_close);
  int open_stdin(std::vector<int>& to_close);
  void started(pid_t pid);
  void read_what_it_left();
  void read_stack_dump();

  // Frames of a stack dump kept for the summary and the hang analysis.
  static constexpr size_t kTopFrames = 3;

  boost::asio::io_context& io_;
  WorkerSpec spec_;
  WorkerOutcome outcome_;
  std::unique_ptr<ExecReport> exec_report_;  // whether it reached exec, read once it ends
  std::vector<std::shared_ptr<OutputRelay>> relays_;
  std::shared_ptr<OutputRelay> tail_relay_;  // the relay of a route with keep_tail
  bool running_ = false;
};

}  // namespace npu_run
