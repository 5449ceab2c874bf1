// LocalAgent: the per-node state machine INIT -> RENDEZVOUS -> RUNNING -> {SUCCEEDED | FAILED |
// RESTARTING | STOPPING}. It owns the signal handling and the restart decisions, and turns the
// final GroupResult into npu_run's exit status and summary.
#pragma once

#include <memory>
#include <string>

#include "npu_run/environment.hpp"
#include "npu_run/launch_config.hpp"
#include "npu_run/rendezvous.hpp"

namespace boost::asio {
class io_context;
}

namespace npu_run {

class Guardian;

struct AgentContext {
  std::string host;
  EnvMap agent_env;
  std::string run_dir;     // where attempt_<n>/<local_rank>/ go
  bool log_files = false;  // false: run_dir holds error files only
};

class LocalAgent {
 public:
  enum class State { kInit, kRendezvous, kRunning, kRestarting, kStopping, kSucceeded, kFailed };

  LocalAgent(boost::asio::io_context& io, const LaunchConfig& cfg, Rendezvous& rendezvous,
             AgentContext context, Guardian* guardian);
  ~LocalAgent();

  // Runs the job to its end on the io_context and returns npu_run's exit status.
  int run();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace npu_run
