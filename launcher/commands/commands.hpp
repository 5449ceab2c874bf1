// The commands of the npu_run binary; main() only parses and dispatches.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "cli/command_line.hpp"

namespace npu_run {

// `npu_run [OPTIONS] SCRIPT ...`: this node's agent (and, on node 0 of a multi-node job, the
// rendezvous server). Returns npu_run's exit status.
int launch(const LaunchConfig& parsed, const EnvMap& env);

// `npu_run rdzv-server ...`: the rendezvous server alone. Returns the job's exit status.
int serve(const ServerCommand& command);

// `npu_run hostnames [EXPR]`: a Slurm hostlist, one host per line, like `scontrol show
// hostnames` (EXPR defaults to $SLURM_JOB_NODELIST); 2 with the error for invalid input.
int print_hostnames(const std::vector<std::string>& args, const EnvMap& env);

// `npu_run doctor ...`: prints the checks; 0 unless one failed.
int doctor(const DoctorCommand& command);

// `npu_run rank-table ...`: writes a rank table (or a merged one). Returns 0.
int make_rank_table(const RankTableCommand& command);

// `npu_run --version`: version, git commit, build type and linkage, architecture, and what the
// running kernel offers (pidfd_open, clone3, close_range, getrandom).
std::string version_report();

// `npu_run completion bash`: prints the bash completion script; 2 for any other shell.
int print_completion(const std::vector<std::string>& args, const EnvMap& env);
// The completion script for these commands' options and these subcommand names.
std::string bash_completion(const std::vector<CommandCompletion>& commands,
                            const std::vector<std::string>& subcommand_names);

// A subcommand: `npu_run NAME ARGS...`, run with ARGS and the environment; returns the exit status.
struct Subcommand {
  const char* name;
  std::function<int(const std::vector<std::string>& args, const EnvMap& env)> run;
};
// Every subcommand, in the order `npu_run --help` and the completion list them.
const std::vector<Subcommand>& subcommands();

// Prints an early exit (help, version, usage error) and returns its exit status.
int report_early_exit(const EarlyExit& early);
// Runs `command`; a UsageError becomes exit 2, any other exception exit 1, each with its message.
int run_guarded(const std::function<int()>& command);

}  // namespace npu_run
