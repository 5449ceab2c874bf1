// What the agent needs of one round's workers, as an interface the agent owns: the real
// WorkerGroup in production, a fake in the agent's unit tests, so that the agent's event logic
// (restarts, re-forms, stops, exit codes) is tested without processes.
#pragma once

#include <sys/types.h>

#include <functional>
#include <memory>
#include <vector>

#include "workers/group_result.hpp"
#include "workers/worker_group.hpp"
#include "workers/worker_spec.hpp"

namespace boost::asio {
class io_context;
}

namespace npu_run {

class Guardian;

class RoundWorkers {
 public:
  using DoneHandler = std::function<void(GroupResult)>;
  virtual ~RoundWorkers() = default;
  // Starts every worker; `on_done` runs once, from the io_context, when all have ended.
  virtual void start(DoneHandler on_done) = 0;
  // Passes `sig` on and keeps running (SIGUSR1/SIGUSR2).
  virtual void forward_signal(int sig) = 0;
  // Stops the workers: `sig`, grace, SIGKILL; a second call escalates.
  virtual void stop(int sig) = 0;
  virtual std::vector<pid_t> running_pids() const = 0;
  virtual pid_t pid_of(int /*local_rank*/) const { return -1; }
  // Each worker's exit as it happens (set before start); fakes may ignore it.
  virtual void on_each_exit(const WorkerGroup::ExitHandler& /*handler*/) {}
};

using MakeRoundWorkers =
    std::function<std::unique_ptr<RoundWorkers>(std::vector<WorkerSpec> specs, StopPolicy policy)>;

// Real processes: a WorkerGroup per round, registered with `guardian` (may be null).
MakeRoundWorkers worker_groups(boost::asio::io_context& io, Guardian* guardian);

}  // namespace npu_run
