// Each framework's part of the worker environment contract (--framework; docs/ARCHITECTURE.md's
// table, ../shared/design/REFERENCE.md sections 9-11), laid over the common part
// (agent/plan/worker_env.hpp), and the inherited variables a framework's workers must not see.
#pragma once

#include <string>

#include "agent/link/assignment.hpp"
#include "basics/environment.hpp"
#include "config/launch_config.hpp"

namespace npu_run {

// Adds the framework's variables for the worker of `local_rank` to `env` (the common part).
void add_framework_env(const LaunchConfig& cfg, const Assignment& a, int local_rank,
                       const EnvMap& agent_env, EnvMap& env);

// MindSpore's scheduler: the same command with MS_ROLE=MS_SCHED, RANK_ID=0, no device, and
// none of the workers' rank variables.
EnvMap scheduler_contract_env(const LaunchConfig& cfg, const Assignment& a, int restart_count);

// Whether an inherited variable is kept from the workers: torch_npu_run's agent switches
// (TORCH_NPU_USE_PARALLEL_TCPSTORE would turn env:// into its own store protocol) for every
// framework, every TORCH_NPU_* for the others, MindSpore's cluster variables where npu_run
// sets them or where they would override a rank table, a rank table's variables in CM_* mode.
bool withheld_from_workers(const LaunchConfig& cfg, const std::string& name);

// Whether MindSpore's scheduler runs beside this node's workers: node 0 of a dynamic cluster.
bool runs_mindspore_scheduler(const LaunchConfig& cfg, const Assignment& a);

// The TF Adapter's JOB_ID: the run id with anything but letters, digits, '-' and '_' as '_'.
std::string tf_job_id(const std::string& run_id);

// ASCEND_DEVICE_ID: a physical device's index among ASCEND_RT_VISIBLE_DEVICES when that is set
// (and lists it), else the physical id.
int logical_device(int physical, const EnvMap& agent_env);

}  // namespace npu_run
