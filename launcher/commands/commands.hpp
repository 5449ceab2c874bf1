// The commands of the npu_run binary: the launch (`npu_run [OPTIONS] SCRIPT`) and one subcommand
// per file, each with its options and its run. subcommands.cpp lists them: main() dispatches
// from that table, and --help, the completion and the man page list the same names.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "agent/health/node_health.hpp"
#include "agent/link/rendezvous_settings.hpp"
#include "agent/node_run.hpp"
#include "basics/environment.hpp"
#include "cli/cli11_fwd.hpp"
#include "cli/early_exit.hpp"
#include "cli/parse_launch.hpp"
#include "doctor/doctor.hpp"
#include "rendezvous/server/server.hpp"

namespace boost::asio {
class io_context;
}

namespace npu_run {

// A command's option table and the values it fills, built fresh for each use (a parse, the
// completion, --help).
class OptionTable {
 public:
  virtual ~OptionTable() = default;
  virtual CLI::App& app() = 0;
};

struct Subcommand {
  const char* name;
  const char* summary;                                    // one line for npu_run --help
  std::function<std::unique_ptr<OptionTable>()> options;  // null: no options of its own
  std::function<int(const std::vector<std::string>& args, const EnvMap& env)> run;
};
// Every subcommand, in the order --help lists them.
const std::vector<Subcommand>& subcommands();
// "Subcommands:" and a line each, for npu_run --help.
std::string subcommand_list();

// Prints an early exit (help, version, usage error) and returns its exit status.
int report_early_exit(const EarlyExit& early);
// Runs `command`; a UsageError becomes exit 2, any other exception exit 1, each with its message.
int run_guarded(const std::function<int()>& command);

// `npu_run [OPTIONS] SCRIPT ...`: this node's agent (and, on node 0 of a multi-node job, the
// rendezvous server). Returns npu_run's exit status.
int launch(const ParsedLaunch& parsed, const EnvMap& env, const LaunchHooks& hooks = {});
// `npu_run --hosts ... SCRIPT`: one agent per host over ssh; the job's exit status.
int launch_on_hosts(const HostsLaunch& launch);
// `npu_run host-agent --name HOST -- AGENT OPTIONS`: what ssh runs on each host (hidden).
int host_agent(const std::vector<std::string>& args, const EnvMap& env);
// The launch's option table, for the completion.
std::unique_ptr<OptionTable> launch_options();

// `npu_run rdzv-server ...`: the rendezvous server alone, on a host of its own.
struct ServerCommand {
  rdzv::JobSettings settings;
  rdzv::ServerOptions options;
  std::string log_level = "info";
};
std::variant<ServerCommand, EarlyExit> parse_server_command(const std::vector<std::string>& args,
                                                            const EnvMap& env);
int serve(const ServerCommand& command);

// `npu_run rank-table ...`: write an HCCL rank table for this server, or merge several.
struct RankTableCommand {
  std::vector<std::string> merge_inputs;  // non-empty: merge these tables
  std::vector<int> devices;               // generate: physical ids, in rank order
  std::vector<std::string> device_ips;    // one per device (from --device-ips or hccn.conf)
  std::string server_id;                  // empty: this host's primary address
  std::string output;                     // empty: the classic file name; "-": stdout
  std::string version = "1.0";
  std::string super_pod_id = "0";
  std::vector<int> super_device_ids;  // version 1.2, one per device
};
std::variant<RankTableCommand, EarlyExit> parse_rank_table_command(
    const std::vector<std::string>& args, const EnvMap& env);
int make_rank_table(const RankTableCommand& command);

// `npu_run doctor ...`: check this host for large or Ascend jobs.
struct DoctorCommand {
  DoctorSettings settings;
  bool json = false;
  // --devices[=LIST]: run the health gate's node checks on these devices instead (all found when
  // no list is given), with the same words as the gate.
  std::optional<NodeHealthOptions> devices;
  HealthRunSettings health_run;
};
std::variant<DoctorCommand, EarlyExit> parse_doctor_command(const std::vector<std::string>& args,
                                                            const EnvMap& env);
int doctor(const DoctorCommand& command);

// `npu_run status ...`: the job as its rendezvous sees it (issue 18).
struct StatusCommand {
  bool direct = false;  // ask the rendezvous at master_addr:master_port, not an agent here
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  std::string run_id = "none";
  std::string token;    // for `direct`; empty: none
  pid_t agent_pid = 0;  // 0: whichever agent runs here
  std::chrono::milliseconds timeout{10'000};
  bool json = false;
  bool stop = false;  // --stop: end the job of the agent here (SIGTERM) and wait for it
  bool dump = false;  // --dump: every running rank's records collected first, nothing stopped
};
std::variant<StatusCommand, EarlyExit> parse_status_command(const std::vector<std::string>& args,
                                                            const EnvMap& env);
int show_status(const StatusCommand& command);

// `npu_run msrun [MSRUN OPTIONS] [NPU_RUN OPTIONS] SCRIPT ...`: MindSpore's msrun command line
// run by npu_run (commands/msrun.cpp).
int msrun_command(const std::vector<std::string>& args, const EnvMap& env);

// `npu_run hostnames [EXPR]`: a Slurm hostlist, one host per line, like `scontrol show
// hostnames` (EXPR defaults to $SLURM_JOB_NODELIST); 2 with the error for invalid input.
int print_hostnames(const std::vector<std::string>& args, const EnvMap& env);

// `npu_run ledger list|clear [HOST...] [--ledger FILE|--log-dir DIR]`: the ledger of bad nodes.
int ledger_command(const std::vector<std::string>& args, const EnvMap& env);
// `npu_run report RUN_DIR`: the job's page from its timeline (commands/report.cpp).
int report_command(const std::vector<std::string>& args, const EnvMap& env);

// `npu_run completion bash|zsh|tcsh`: the completion script, from the option tables.
int print_completion(const std::vector<std::string>& args, const EnvMap& env);
// The script for `shell`, one of kCompletionShells (cli/completion_scripts.hpp).
std::string completion_script_for(std::string_view shell);

// `npu_run --version`: version, git commit, build type and linkage, architecture, and what the
// running kernel offers (pidfd_open, clone3, close_range, getrandom).
std::string version_report();

}  // namespace npu_run
