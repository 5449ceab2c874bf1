// What asks this node to stop, or to pass a signal on, from outside the job: the stop signals
// of --signals-to-handle (a second one escalates), SIGUSR1/SIGUSR2 forwarded to the workers
// (Slurm's --signal=USR1@60 warning) unless the user made them stop signals, and the exit of
// the process that started npu_run (mpirun, slurmstepd) with --stop-with-parent.
#pragma once

#include <boost/asio/signal_set.hpp>
#include <functional>
#include <string>
#include <vector>

#include "agent/core/parent_watch.hpp"
#include "agent/round/round_workers.hpp"
#include "config/launch_config.hpp"

namespace npu_run {

class StopRequests {
 public:
  struct Handlers {
    // Stop the job's part on this node as `sig` does; `why` says what happened.
    std::function<void(int sig, const std::string& why)> stop;
    // The workers signals are forwarded to; null while none run.
    std::function<RoundWorkers*()> running;
  };

  StopRequests(boost::asio::io_context& io, const SupervisionConfig& cfg, Handlers handlers);

  void start();
  void cancel();
  // What a received signal does (the agent's signal_set calls it; tests call it directly).
  void on_signal(int sig);

 private:
  std::vector<int> handled_signals() const;
  void wait_for_signal();
  void watch_parent();

  const SupervisionConfig& cfg_;
  Handlers handlers_;
  boost::asio::signal_set signals_;
  ParentWatch parent_watch_;
};

}  // namespace npu_run
