// `npu_run msrun ...`: MindSpore's msrun command line, unchanged, run by npu_run's agent: the
// scheduler and workers as msrun starts them (--framework mindspore), msrun's file names, and
// --join False as a detached agent that still supervises the job. The translation is
// cli/msrun_line.hpp's; this file sets what options cannot say and picks how to run.
#include <fmt/format.h>
#include <sys/stat.h>

#include <CLI/CLI.hpp>
#include <boost/asio/ip/host_name.hpp>
#include <filesystem>
#include <iostream>
#include <regex>

#include "basics/usage_error.hpp"
#include "cli/launch_options.hpp"
#include "cli/msrun_line.hpp"
#include "commands/commands.hpp"
#include "commands/detached_agent.hpp"
#include "devices/device_discovery.hpp"
#include "devices/numa_binding.hpp"
#include "net/host_address.hpp"

namespace npu_run {

namespace {

constexpr const char* kMsrunHelp =
    R"(npu_run msrun [MSRUN OPTIONS] [NPU_RUN OPTIONS] SCRIPT [ARGS...]

MindSpore's msrun command line, as it is typed today, run by npu_run: change `msrun` to
`npu_run msrun`. Node 0's agent starts MindSpore's scheduler beside its workers and supervises
both; every worker gets msrun's variables (MS_ROLE, MS_SCHED_HOST/PORT, MS_WORKER_NUM,
MS_NODE_ID = RANK_ID = its global rank, DEVICE_ID, RANK_SIZE). npu_run's own options (restarts,
hang detection, the health gate, ...) may be given before the script.

msrun options (msrun's defaults):
  --worker_num N         workers in the whole job (8)
  --local_worker_num N   workers on this node (8); npu_run runs as many on every node
  --master_addr ADDR     node 0's address (127.0.0.1): npu_run's rendezvous meets there
  --master_port PORT     the rendezvous port (8118); the scheduler gets a free port node 0 holds
  --node_rank N          this node's rank (-1: the rendezvous assigns it)
  --log_dir DIR          worker_<rank>.log (stdout and stderr) and scheduler.log go here (.)
  --worker_log_name NAME files NAME_<rank>.log instead; {ip} and {hostname} are filled in
  --join True|False      False (the default): return at once; a detached npu_run agent
                         supervises the job (npu_run status --pid PID; --stop to end it)
  --tail_worker_log R,.. with --join True, only these ranks' output on the console (-1: all)
  --cluster_time_out S   seconds the cluster may take to form (600): --rdzv-timeout
  --bind_core True       npu_run's own CPU split near each device (--numa-binding exclusive)
  --rank_table_file F    MindSpore's rank-table mode (no scheduler): --rank-table F
  --sim_level N          MindSpore's dry run: no cluster, no scheduler (MS_SIMULATION_LEVEL)
  --sim_rank_id N        with --sim_level, one process as rank N

Differences from msrun: docs/guide/differences.md (/usr/share/doc/npu-run/guide/).
)";

// npu_run's options that msrun's own already say (or that make another kind of launch): given
// beside them they would contradict msrun's, silently, whichever CLI11 kept.
constexpr std::pair<const char*, const char*> kSaidByMsrun[] = {
    {"--framework",
     "npu_run msrun launches MindSpore; leave it out, or use npu_run without msrun for another "
     "framework"},
    {"--nproc-per-node", "msrun's --local_worker_num says it; leave it out"},
    {"--nnodes", "msrun's --worker_num and --local_worker_num say it; leave it out"},
    {"--node-rank", "msrun's --node_rank says it; leave it out"},
    {"--master-addr", "msrun's --master_addr says it; leave it out"},
    {"--master-port", "msrun's --master_port says it; leave it out"},
    {"--rdzv-endpoint", "msrun's --master_addr and --master_port say it; leave it out"},
    {"--rdzv-timeout", "msrun's --cluster_time_out says it; leave it out"},
    {"--rank-table", "msrun's --rank_table_file says it; leave it out"},
    {"--numa-binding", "msrun's --bind_core True says it; leave it out"},
    {"--hosts",
     "npu_run msrun runs this node's part, as msrun does: run it on every node, or "
     "use npu_run --framework mindspore --hosts ... without msrun"},
    {"--hostfile",
     "npu_run msrun runs this node's part, as msrun does: run it on every node, or "
     "use npu_run --framework mindspore --hostfile ... without msrun"},
};

void refuse_options_msrun_says(const std::vector<std::string>& typed, const CLI::App& app) {
  for (const std::string& name : typed) {
    const CLI::Option* opt = app.get_option_no_throw(name);
    if (opt == nullptr) continue;  // the parse names an unknown option
    for (const auto& [said, why] : kSaidByMsrun) {
      if (opt->check_name(said)) throw UsageError(fmt::format("npu_run msrun {}: {}", name, why));
    }
  }
}

bool is_help(const std::vector<std::string>& args) {
  for (const std::string& a : args) {
    if (a == "--help" || a == "-h") return true;
    if (a.empty() || a[0] != '-') return false;  // the script's own --help is the script's
  }
  return false;
}

// The words msrun fills into --worker_log_name: this node's address towards the master (what
// msrun's _get_local_ip reports) and its host name.
std::string expand_log_name(const std::string& pattern, const std::string& master_addr) {
  if (pattern.empty()) return "worker";
  std::string ip = net::route_source_address(master_addr);
  if (ip.empty()) ip = "127.0.0.1";
  std::string name = std::regex_replace(pattern, std::regex(R"(\{ip\})"), ip);
  return std::regex_replace(name, std::regex(R"(\{hostname\})"), boost::asio::ip::host_name());
}

// msrun makes --log_dir with mode 0700 when it is missing.
void make_log_dir(const std::string& dir) {
  if (dir.empty()) return;
  std::error_code ec;
  if (std::filesystem::is_directory(dir, ec)) return;
  std::filesystem::create_directories(dir, ec);
  if (!ec) std::filesystem::permissions(dir, std::filesystem::perms::owner_all, ec);
  if (ec || !std::filesystem::is_directory(dir)) {
    throw UsageError(
        fmt::format("msrun --log_dir {}: cannot create it: {}; choose a directory "
                    "you can write to",
                    dir, ec ? ec.message() : "not a directory"));
  }
}

// --bind_core True: npu_run's own split of the physical cores near each device where there are
// devices (--numa-binding exclusive), else an even split of the CPUs (apply_msrun_line).
std::vector<std::string> with_bind_core(const MsrunLine& line, const EnvMap& env) {
  std::vector<std::string> args = line.launch_args;
  if (line.bind_core && discover_devices(env).kind != DeviceKind::kNone)
    args.insert(args.begin(), {"--numa-binding", "exclusive"});
  return args;
}

void apply_msrun_line(const MsrunLine& line, LaunchConfig& cfg) {
  if (!line.join && cfg.supervision.stop_with_parent) {
    throw UsageError(
        "msrun --join False inside a Slurm step or under mpirun: the step ends when npu_run "
        "returns, and with it the job; give --join True");
  }
  MsrunLogs logs;
  logs.dir = line.log_dir;
  logs.stem = expand_log_name(line.worker_log_name, cfg.rendezvous.master_addr);
  logs.console_ranks = line.tail_ranks;
  logs.console = line.join;
  cfg.output.msrun_logs = logs;
  cfg.worker.ms_simulation = line.simulation;
  if (line.bind_core && cfg.worker.numa.empty()) {
    // No device to be near (with devices, --numa-binding exclusive placed them): msrun's even
    // split of the CPUs this process may use.
    cfg.worker.numa = split_cpus_evenly(allowed_cpus(), cfg.shape.nproc_per_node);
  }
  // msrun's workers outlive a closed terminal only when detached; so do ours.
  if (!line.join) cfg.supervision.stop_with_parent = false;
}

void announce_detached(pid_t pid, const MsrunLogs& logs, const std::string& log_file) {
  const std::string dir = logs.dir.empty() ? "." : logs.dir;
  std::cout << fmt::format(
      "npu_run: the job runs on under the detached npu_run agent pid {} (--join False)\n"
      "  logs:   {}/{}_<rank>.log, {}/scheduler.log; the agent's own: {}\n"
      "  follow: npu_run status --pid {}\n"
      "  stop:   npu_run status --stop --pid {}\n",
      pid, dir, logs.stem, dir, log_file, pid, pid);
}

std::string agent_log_file(const MsrunLogs& logs, pid_t pid) {
  const std::string name = fmt::format("npu_run_{}.log", pid);
  return logs.dir.empty() ? name : logs.dir + "/" + name;
}

int run_msrun(const std::vector<std::string>& args, const EnvMap& env) {
  LaunchOptions options;
  const auto takes_value = [&options](const std::string& name) {
    const CLI::Option* opt = options.app().get_option_no_throw(name);
    return opt != nullptr && opt->get_expected_max() > 0;
  };
  const MsrunLine line = read_msrun_line(args, takes_value, env);
  refuse_options_msrun_says(line.npu_run_options, options.app());
  ParseResult parsed = parse_command_line(with_bind_core(line, env), env);
  if (const auto* early = std::get_if<EarlyExit>(&parsed)) return report_early_exit(*early);
  if (std::holds_alternative<ParsedHosts>(parsed)) {  // PET_HOSTS or PET_HOSTFILE
    throw UsageError(
        "npu_run msrun runs this node's part, as msrun does: unset PET_HOSTS and PET_HOSTFILE, "
        "or use npu_run --framework mindspore --hosts ... without msrun");
  }
  auto& launch_line = std::get<ParsedLaunch>(parsed);
  apply_msrun_line(line, launch_line.config);
  const MsrunLogs& logs = *launch_line.config.output.msrun_logs;
  if (launch_line.config.agent.dry_run) return launch(launch_line, env);
  make_log_dir(logs.dir);
  if (line.join) return launch(launch_line, env);
  return run_detached([&](pid_t pid) { return agent_log_file(logs, pid); },
                      [&](const LaunchHooks& hooks) { return launch(launch_line, env, hooks); },
                      [&](pid_t pid) { announce_detached(pid, logs, agent_log_file(logs, pid)); });
}

}  // namespace

int msrun_command(const std::vector<std::string>& args, const EnvMap& env) {
  if (is_help(args)) {
    std::cout << kMsrunHelp;
    return 0;
  }
  return run_guarded([&] { return run_msrun(args, env); });
}

}  // namespace npu_run
