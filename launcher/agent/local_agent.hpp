// LocalAgent: the per-node state machine INIT -> RENDEZVOUS -> RUNNING -> REPORTING -> (decision:
// RENDEZVOUS again for a restart, or DONE). It owns the signal handling, runs each round's
// WorkerGroup, reports the result, and follows the job's decision, which the rendezvous makes
// the same way for one node or many.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "agent/rendezvous.hpp"
#include "agent/round_workers.hpp"
#include "basics/environment.hpp"
#include "config/launch_config.hpp"

namespace boost::asio {
class io_context;
}

namespace npu_run {

class Guardian;

struct AgentContext {
  std::string host;
  EnvMap agent_env;
  std::string run_dir;            // where attempt_<n>/<local_rank>/ go
  bool log_files = false;         // false: run_dir holds error files only
  bool hosts_rendezvous = false;  // this process also runs the rendezvous server (node 0)
  // How each round's workers are made; empty: real processes (WorkerGroup). Tests give fakes.
  MakeRoundWorkers make_workers;
};

class LocalAgent {
 public:
  enum class State { kInit, kRendezvous, kRunning, kReporting, kDone };
  using FinishedHandler = std::function<void(int exit_code)>;

  LocalAgent(boost::asio::io_context& io, const LaunchConfig& cfg, Rendezvous& rendezvous,
             AgentContext context, Guardian* guardian);
  ~LocalAgent();

  // Joins the job and runs it on the io_context; `on_finished` gets npu_run's exit status once
  // this node is done (the caller decides when to stop the io_context: node 0 may still serve
  // the rendezvous to the other nodes).
  void start(FinishedHandler on_finished);

  // What a received signal does. The agent's own signal_set calls it; tests call it directly.
  void handle_signal(int sig);
  // Stops the job's part on this node as the stop signal `sig` does; `why` says what happened
  // ("the launcher's ssh session closed"). A second call escalates to SIGKILL.
  void stop(int sig, const std::string& why);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace npu_run
