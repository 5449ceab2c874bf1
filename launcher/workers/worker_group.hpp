// WorkerGroup: the processes of one attempt on this node. Spawns every WorkerSpec (Boost.Process
// v2, own process group, PR_SET_PDEATHSIG), observes exits as events in the agent's io_context,
// and on the first failure or on request stops the rest: signal, grace, SIGKILL, bounded wait.
// It reports facts (a GroupResult); restart decisions belong to the agent.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <vector>

#include "workers/group_result.hpp"
#include "workers/worker_spec.hpp"

namespace boost::asio {
class io_context;
}

namespace npu_run {

class Guardian;

struct StopPolicy {
  std::chrono::milliseconds term_timeout{30'000};  // first signal -> SIGKILL
  std::chrono::milliseconds kill_timeout{5'000};   // SIGKILL -> give up on a pid (D state)
  // false: the group leaves the sweep of escaped processes to its caller, which runs two groups
  // at once (MindSpore's scheduler beside the workers) and sweeps once both have ended.
  bool sweep_escaped = true;
};

// Stops the processes that left an attempt's process groups (they carry the agent's mark, or
// are orphans of the subreaper agent), sparing `spare` (the guardian, workers SIGKILL could
// not end), and says which it stopped. Called when no process of the attempt runs any more.
void sweep_escaped_processes(const std::vector<pid_t>& spare);

class WorkerGroup {
 public:
  using DoneHandler = std::function<void(GroupResult)>;

  // `guardian` may be null (tests); otherwise every worker's process group is registered with it.
  WorkerGroup(boost::asio::io_context& io, std::vector<WorkerSpec> specs, StopPolicy policy,
              Guardian* guardian);
  ~WorkerGroup();
  WorkerGroup(const WorkerGroup&) = delete;
  WorkerGroup& operator=(const WorkerGroup&) = delete;

  // Starts every worker. `on_done` runs once, from the io_context, when all have exited (or were
  // given up on after SIGKILL). A worker that cannot be started is the root cause of a failure.
  void start(DoneHandler on_done);

  // Sends `sig` to every running worker's process group and keeps running (SIGUSR1/SIGUSR2).
  void forward_signal(int sig);

  // Stops the group: `sig` to every process group, SIGKILL after the grace. A second call
  // escalates to SIGKILL at once (a second Ctrl-C); a first call while the group is already
  // stopping after a failure only forwards `sig`.
  void stop(int sig);

  std::vector<pid_t> running_pids() const;
  // The pid of the worker with `local_rank`, -1 if there is none.
  pid_t pid_of(int local_rank) const;

  // Runs for each worker's exit as it is seen, before the group is done (the hang watch's
  // straggler clock). Set before start().
  using ExitHandler = std::function<void(int local_rank, bool success)>;
  void on_each_exit(ExitHandler handler);

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;
};

}  // namespace npu_run
