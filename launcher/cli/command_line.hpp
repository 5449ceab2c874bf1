// The npu_run command line (CLI11): every torchrun flag in both spellings, PET_<NAME> env
// defaults, and the checks that turn flags into a LaunchConfig. No launch logic lives here.
#pragma once

#include <string>
#include <variant>
#include <vector>

#include "basics/environment.hpp"
#include "config/launch_config.hpp"
#include "doctor/doctor.hpp"
#include "rendezvous/server.hpp"
#include "rendezvous/state.hpp"

namespace npu_run {

// --help, --version and every usage error end parsing early with a text and an exit code.
struct EarlyExit {
  int exit_code = 0;
  std::string text;
  bool to_stderr = false;
  bool version = false;  // --version: the caller prints the build and kernel facts instead
};

using ParseResult = std::variant<LaunchConfig, EarlyExit>;

// `args` excludes argv[0]. `env` supplies PYTHON_EXEC, device discovery and the other
// non-flag inputs; PET_* flag defaults are read by CLI11 from the process environment.
ParseResult parse_command_line(const std::vector<std::string>& args, const EnvMap& env);

// `npu_run rdzv-server ...`: the rendezvous server alone, on a dedicated host.
struct ServerCommand {
  rdzv::JobSettings settings;
  rdzv::ServerOptions options;
  std::string log_level = "info";
};

// `args` excludes "npu_run rdzv-server".
std::variant<ServerCommand, EarlyExit> parse_server_command(const std::vector<std::string>& args);

// `npu_run rank-table ...`: write an HCCL rank table for this server, or merge several.
struct RankTableCommand {
  std::vector<std::string> merge_inputs;  // non-empty: merge these tables
  std::vector<int> devices;               // generate: physical ids, in rank order
  std::string hccn_conf;                  // where device addresses come from
  std::vector<std::string> device_ips;    // or given directly, one per device
  std::string server_id;                  // empty: this host's primary address
  std::string output;                     // empty: the classic file name; "-": stdout
  std::string version = "1.0";
  std::string super_pod_id = "0";
  std::vector<int> super_device_ids;  // version 1.2, one per device
};

// `npu_run doctor ...`: check this host for large or Ascend jobs.
struct DoctorCommand {
  DoctorSettings settings;
  bool json = false;
};

// `args` excludes "npu_run doctor".
std::variant<DoctorCommand, EarlyExit> parse_doctor_command(const std::vector<std::string>& args,
                                                            const EnvMap& env);

// The options of one command as its CLI11 table defines them, for `npu_run completion bash`.
struct OptionCompletion {
  std::vector<std::string> names;  // "-t", "--tee", ...
  bool takes_value = false;
  std::string type_name;  // FILE, DIR, {a,b,...}, or what CLI11 shows (TEXT, INT, ...)
};
struct CommandCompletion {
  std::string name;  // "" for the launch command, else the subcommand
  std::vector<OptionCompletion> options;
};
// The launch command first, then every subcommand that has options.
std::vector<CommandCompletion> command_completions();

// `args` excludes "npu_run rank-table".
std::variant<RankTableCommand, EarlyExit> parse_rank_table_command(
    const std::vector<std::string>& args, const EnvMap& env);

}  // namespace npu_run
