// What the caller tells an agent about where it runs (agent/local_agent.hpp): its host, its
// environment, its run directory, whether it also hosts the rendezvous, and what it serves
// beside its own metrics. Read by the agent and its rooms (agent/core/agent_room.hpp).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "agent/round/round_workers.hpp"
#include "basics/environment.hpp"

namespace npu_run {

class MetricsText;

struct AgentContext {
  std::string host;
  EnvMap agent_env;
  std::string run_dir;            // where attempt_<n>/<local_rank>/ go
  bool log_files = false;         // false: run_dir holds error files only
  bool hosts_rendezvous = false;  // this process also runs the rendezvous server (node 0)
  // How each round's workers are made; empty: real processes (WorkerGroup). Tests give fakes.
  MakeRoundWorkers make_workers;
  // --metrics-port: more of what this node serves (node 0's rendezvous server and store).
  std::vector<std::function<void(MetricsText&)>> metrics_sources{};
};

}  // namespace npu_run
