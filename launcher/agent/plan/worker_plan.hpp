// The worker plan of one attempt: a WorkerSpec per local rank, from the LaunchConfig, the
// Assignment the rendezvous gave this node, and where the attempt's files go.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "agent/link/assignment.hpp"
#include "basics/environment.hpp"
#include "config/launch_config.hpp"
#include "workers/progress_beats.hpp"
#include "workers/worker_spec.hpp"

namespace npu_run {

// Where files of one attempt go: <run_dir>/attempt_<n>/<local_rank>/.
struct AttemptLayout {
  std::string run_dir;     // empty: no log files and no error files
  bool log_files = false;  // false: run_dir only holds error files
  int attempt = 0;
};

std::string attempt_rank_dir(const AttemptLayout& layout, int local_rank);

// One spec per local rank.
std::vector<WorkerSpec> make_worker_specs(const LaunchConfig& cfg, const Assignment& assignment,
                                          const AttemptLayout& layout, const EnvMap& agent_env);

// MindSpore's scheduler on node 0 of a dynamic cluster (agent/plan/framework_env.hpp): the workers'
// command with the scheduler's contract, local and global rank -1, no device, its console lines
// prefixed "[scheduler]", its files under <run_dir>/attempt_<n>/scheduler/. Nullopt elsewhere.
std::optional<WorkerSpec> make_scheduler_spec(const LaunchConfig& cfg, const Assignment& assignment,
                                              const AttemptLayout& layout, const EnvMap& agent_env);

// NPU_RUN_PROGRESS for every worker, its socket in the agent's `agent_directory` (empty: none
// could be made), and with hang detection PYTHONFAULTHANDLER=1 unless the agent's environment
// sets it: a hang's stack dump is SIGABRT, on which faulthandler prints every Python thread.
void add_progress_env(std::vector<WorkerSpec>& specs, const std::string& agent_directory,
                      const LaunchConfig& cfg, const EnvMap& agent_env);

// The interface holding `address`, the one peers use for this node: what the workers'
// *_SOCKET_IFNAME name. "" (with a warning when an address was given) when none holds it.
std::string socket_interface_of(const std::string& address);

// torchrun's "${local_rank}" substitution in the user's arguments.
std::vector<std::string> substitute_local_rank(const std::vector<std::string>& args,
                                               int local_rank);

}  // namespace npu_run
