// `npu_run msrun ...`: msrun's command line as MindSpore's docs type it (--worker_num=8
// --local_worker_num=4 --master_addr=... --node_rank=0 --log_dir=msrun_log --join=True
// --cluster_time_out=300 net.py), read into npu_run's own options. msrun's options may be mixed
// with npu_run's before the script; the script gets `python` prepended unless it is python,
// python3 or pytest, as msrun does (../shared/design/REFERENCE.md section 9). What the options
// cannot say (msrun's file names, its dry run) comes back beside them, for the command to set
// in the LaunchConfig (commands/msrun.cpp).
#pragma once

#include <functional>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "basics/environment.hpp"
#include "config/launch_config.hpp"

namespace npu_run {

struct MsrunLine {
  std::vector<std::string> launch_args;     // npu_run's command line, script and its arguments last
  bool join = false;                        // --join: wait for the job (msrun's default: False)
  std::string log_dir;                      // --log_dir; empty: the working directory
  std::string worker_log_name;              // --worker_log_name, {ip} and {hostname} unexpanded
  std::optional<std::set<int>> tail_ranks;  // --tail_worker_log; nullopt: "-1", every worker
  std::optional<MindSporeSimulation> simulation;  // --sim_level (or MS_SIMULATION_LEVEL)
  bool bind_core = false;  // --bind_core True: pin each worker to a share of the CPUs
  std::vector<std::string> npu_run_options;  // npu_run's options as typed, without values
};

// Throws UsageError naming the msrun option and the fix: a count out of range,
// --local_worker_num above --worker_num or not dividing it, --node_rank beyond the nodes, a
// True/False option with another value, a --bind_core map (npu_run splits CPUs itself), a
// --tail_worker_log rank outside the job. `takes_value(name)` says whether an npu_run option
// consumes the next word. `env`: msrun also reads MS_SIMULATION_LEVEL and RANK_ID for a dry run.
MsrunLine read_msrun_line(const std::vector<std::string>& args,
                          const std::function<bool(const std::string&)>& takes_value,
                          const EnvMap& env);

}  // namespace npu_run
