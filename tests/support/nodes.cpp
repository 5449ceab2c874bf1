#include "support/nodes.hpp"

namespace npu_run::testing {

const std::vector<std::string> kFastHeartbeats = {"--heartbeat-interval", "0.2",
                                                  "--heartbeat-timeout", "1.5"};

std::unique_ptr<NpuRunProcess> start_node(int port, int nnodes, int nproc,
                                          const std::string& script, std::vector<std::string> flags,
                                          const EnvOverrides& env) {
  std::vector<std::string> args = {"--nnodes",         std::to_string(nnodes),
                                   "--nproc-per-node", std::to_string(nproc),
                                   "--master-port",    std::to_string(port)};
  args.insert(args.end(), kFastHeartbeats.begin(), kFastHeartbeats.end());
  args.insert(args.end(), flags.begin(), flags.end());
  for (const char* a : {"--no-python", "/bin/sh", "-c"}) args.emplace_back(a);
  args.push_back(script);
  return std::make_unique<NpuRunProcess>(args, env);
}

EnvOverrides slurm_step_env(int node_id, int tasks_per_node, const std::string& job_id) {
  const std::string tasks = std::to_string(tasks_per_node);
  return {{"SLURM_JOB_ID", job_id},
          {"SLURM_STEP_ID", "0"},
          {"SLURM_JOB_NODELIST", "n[1-2]"},
          {"SLURM_STEP_NODELIST", "n[1-2]"},
          {"SLURM_NNODES", "2"},
          {"SLURM_STEP_NUM_NODES", "2"},
          {"SLURM_NODEID", std::to_string(node_id)},
          {"SLURM_PROCID", std::to_string(node_id * tasks_per_node)},
          {"SLURM_LOCALID", "0"},
          {"SLURM_STEP_TASKS_PER_NODE", tasks + "(x2)"},
          {"SLURM_TASKS_PER_NODE", tasks + "(x2)"},
          {"SLURM_NTASKS", std::to_string(2 * tasks_per_node)}};
}

}  // namespace npu_run::testing
