// One "node" of a multi-node job on loopback: an npu_run process joining 127.0.0.1:port, with
// heartbeats short enough that a lost peer is noticed within a test's patience.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "support/harness.hpp"

namespace npu_run::testing {

extern const std::vector<std::string> kFastHeartbeats;

// Runs `script` with /bin/sh -c in each of `nproc` workers.
std::unique_ptr<NpuRunProcess> start_node(int port, int nnodes, int nproc,
                                          const std::string& script,
                                          std::vector<std::string> flags = {},
                                          const EnvOverrides& env = {});

// What srun sets for task `node_id` of a step over n1,n2 in `job_id` (step 0), with
// `tasks_per_node` tasks on each node.
EnvOverrides slurm_step_env(int node_id, int tasks_per_node = 1,
                            const std::string& job_id = "4242");

}  // namespace npu_run::testing
