// The worker environment contract (docs/ARCHITECTURE.md): the variables npu_run sets for each
// worker. Everything else in the agent's environment is inherited unchanged.
#pragma once

#include <string>

#include "agent/link/assignment.hpp"
#include "basics/environment.hpp"
#include "config/launch_config.hpp"

namespace npu_run {

struct WorkerSlot {
  int local_rank = 0;
  int restart_count = 0;
  std::string error_file;  // TORCHELASTIC_ERROR_FILE; empty leaves it unset
};

// Only the variables npu_run sets (what --dry-run shows).
EnvMap worker_contract_env(const LaunchConfig& cfg, const Assignment& assignment,
                           const WorkerSlot& slot, const EnvMap& agent_env);

// The agent's environment, without the rendezvous token and what the framework's workers must
// not inherit (agent/plan/framework_env.hpp), with the contract laid over it: what the worker
// actually receives.
EnvMap merged_worker_env(const LaunchConfig& cfg, const EnvMap& agent_env, const EnvMap& contract);

// True when npu_run sets OMP_NUM_THREADS=1 (unset in the agent and more than one worker), so
// the agent can say so once.
bool omp_threads_defaulted(const LaunchConfig& cfg, const EnvMap& agent_env);

}  // namespace npu_run
