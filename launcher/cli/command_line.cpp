#include "cli/command_line.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <boost/asio/ip/address.hpp>
#include <cmath>
#include <csignal>
#include <filesystem>
#include <thread>

#include "ascend/hccn_conf.hpp"
#include "ascend/rank_table.hpp"
#include "basics/text.hpp"
#include "basics/token_file.hpp"
#include "basics/usage_error.hpp"
#include "cluster/cluster_env.hpp"
#include "config/line_prefix.hpp"
#include "devices/device_discovery.hpp"
#include "devices/device_list.hpp"
#include "npu_run/version.hpp"

namespace npu_run {
namespace {

namespace fs = std::filesystem;

// Upper bound on workers per node: far above any accelerator server, low enough that a typo
// like 80000 is caught before forking a process storm.
constexpr int kMaxWorkersPerNode = 1024;
constexpr int kMaxNodes = 1'000'000;

// Type names shown in --help, and read by `npu_run completion bash`: FILE and DIR complete paths,
// {a,b,...} completes these words.
constexpr const char* kLogLevels = "{trace,debug,info,warn,error,critical,off}";

const char* const kFooter = R"(Examples:
  npu_run --nproc-per-node 8 train.py --cfg a.yaml
  npu_run --nproc-per-node auto --devices 4-7 train.py          # 4 workers on NPUs 4..7
  npu_run --nproc-per-node 4 -m mypkg.train --lr 0.1              # python -u -m mypkg.train
  npu_run --nproc-per-node 2 --no-python ./run.sh                  # any executable
  npu_run --nproc-per-node 8 --log-dir logs --local-ranks-filter 0 train.py
                                                # rank 0 on the console, every rank in logs/
  npu_run --nproc-per-node 8 --dry-run --json train.py            # show the plan, start nothing

Every option can also come from the environment as PET_<NAME> (e.g. PET_NPROC_PER_NODE=8);
the command line wins. Workers run $PYTHON_EXEC -u SCRIPT ARGS (PYTHON_EXEC defaults to python3).
"${local_rank}" in ARGS is replaced by each worker's local rank, as torchrun does.

Exit status: 0 when every worker succeeded; the root-cause worker's exit code (128+N for a
signal) when one failed; 128+N when npu_run was stopped by signal N; 2 for usage errors;
125 when the rendezvous failed (nodes missing, agents disagreeing, a node or the server lost).

Several nodes: run the same command on each with --nnodes N --master-addr NODE0 [--node-rank R];
node 0's agent hosts the rendezvous. `npu_run rdzv-server --help` runs it on a host of its own.
)";

// Raw flag values as CLI11 fills them; validated into LaunchConfig afterwards.
struct RawFlags {
  std::string nnodes = "1:1";
  std::string nproc_per_node = "1";
  int node_rank = 0;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  std::string local_addr;
  std::string rdzv_backend = "static";
  std::string rdzv_endpoint;
  std::string run_id = "none";
  std::string rdzv_conf;
  std::string rdzv_token;
  std::string rdzv_token_file;
  bool standalone = false;
  double rdzv_timeout = 900;
  double rdzv_last_call = 30;
  int rdzv_backlog = 0;
  double heartbeat_interval = 5;
  double heartbeat_timeout = 30;
  double exit_barrier_timeout = 300;
  int max_restarts = 0;
  double monitor_interval = 0.1;
  std::string start_method = "spawn";
  std::string role = "default";
  bool module = false;
  bool no_python = false;
  bool run_path = false;
  std::string log_dir;
  std::string redirects = "0";
  std::string tee = "0";
  std::string local_ranks_filter;
  std::string prefix_template;
  double term_timeout = 30.0;
  std::string signals_to_handle = "SIGTERM,SIGINT,SIGHUP,SIGQUIT";
  std::string devices;
  std::string log_level = "info";
  bool dry_run = false;
  bool json = false;
  std::string soc = "none";
  std::string rank_table;
  std::string hccn_conf;
  std::string cluster = "auto";
  int agents_per_node = 1;
};

// Builds the CLI11 definition; option pointers are kept so that validation can say whether a
// value came from the command line or from its PET_ variable.
class CommandLine {
 public:
  CommandLine()
      : app_(
            "npu_run [OPTIONS] SCRIPT [ARGS...]\n\nLaunch one worker per device, on one node or "
            "many; a "
            "drop-in for torchrun's command line.",
            "npu_run") {
    app_.set_version_flag("--version", std::string("npu_run ") + kVersion);
    app_.footer(kFooter);
    app_.prefix_command();  // parsing stops at the script; everything after it is the script's

    auto* shape = "Job shape";
    nnodes_ = add("--nnodes", raw_.nnodes, "Number of nodes, N or MIN:MAX (default 1)", shape);
    nproc_ = app_.add_option("--nproc-per-node,--nproc_per_node,--nproc", raw_.nproc_per_node,
                             "Workers per node: N, auto (detected NPUs, else GPUs, else 1), npu, "
                             "gpu, or cpu (one per core)")
                 ->envname("PET_NPROC_PER_NODE")
                 ->group(shape);
    devices_ =
        add("--devices", raw_.devices,
            "Physical device id per local rank, e.g. 4-7 or 0,2,4,6 (default 0..N-1)", shape);
    node_rank_ = add("--node-rank", raw_.node_rank, "Rank of this node (default 0)", shape);
    master_addr_ = add("--master-addr", raw_.master_addr,
                       "Address of the rendezvous host, node 0 (default 127.0.0.1)", shape);
    master_port_ =
        add("--master-port", raw_.master_port,
            "Rendezvous port on the master (default 29500); workers get another port", shape);
    local_addr_ = add("--local-addr", raw_.local_addr,
                      "Address of this node that peers should use (multi-NIC hosts)", shape);
    rdzv_backend_ = add("--rdzv-backend", raw_.rdzv_backend,
                        "Accepted for torchrun compatibility (static, c10d, etcd, etcd-v2); "
                        "npu_run always uses its own TCP rendezvous",
                        shape)
                        ->type_name("{static,c10d,etcd,etcd-v2}");
    rdzv_endpoint_ =
        add("--rdzv-endpoint", raw_.rdzv_endpoint,
            "HOST[:PORT] of the rendezvous; same as --master-addr/--master-port", shape);
    run_id_ = app_.add_option("--run-id,--run_id,--rdzv-id,--rdzv_id", raw_.run_id,
                              "Job id shared by all nodes; names the log directory (default none)")
                  ->envname("PET_RDZV_ID")
                  ->group(shape);
    rdzv_conf_ = add("--rdzv-conf", raw_.rdzv_conf,
                     "Rendezvous settings key=value,... (timeout, join_timeout, "
                     "last_call_timeout, close_timeout, read_timeout: seconds a new connection "
                     "has to finish its handshake, default 10)",
                     shape);
    rdzv_token_ =
        app_.add_option("--rdzv-token,--rdzv_token", raw_.rdzv_token,
                        "Shared secret every node proves it knows (HMAC challenge; never sent). "
                        "Prefer the NPU_RUN_RDZV_TOKEN variable or --rdzv-token-file: a flag shows "
                        "in ps until npu_run has read it")
            ->envname(kTokenVariable)
            ->group(shape);
    rdzv_token_file_ = add("--rdzv-token-file", raw_.rdzv_token_file,
                           "File whose first line is the rendezvous token (mode 600, yours). "
                           "Inside a Slurm step a per-job token is derived when none is given",
                           shape)
                           ->type_name("FILE");
    standalone_ = add_flag("--standalone", raw_.standalone,
                           "Single-node job with its own local rendezvous", shape);
    rdzv_timeout_ = add("--rdzv-timeout", raw_.rdzv_timeout,
                        "Seconds to wait for all nodes to join (default 900; also rdzv-conf "
                        "join_timeout)",
                        shape);
    rdzv_last_call_ =
        add("--rdzv-last-call", raw_.rdzv_last_call,
            "Elastic --nnodes MIN:MAX: seconds to wait for more nodes once MIN have joined "
            "(default 30; also rdzv-conf last_call_timeout)",
            shape);
    rdzv_backlog_ =
        add("--rdzv-backlog", raw_.rdzv_backlog,
            "Listen backlog of the rendezvous server (default: net.core.somaxconn)", shape);
    heartbeat_interval_ = add("--heartbeat-interval", raw_.heartbeat_interval,
                              "Seconds between heartbeats to the rendezvous (default 5)", shape);
    heartbeat_timeout_ = add("--heartbeat-timeout", raw_.heartbeat_timeout,
                             "Seconds of silence after which a node or the server counts as lost "
                             "(default 30)",
                             shape);
    exit_barrier_timeout_ = add("--exit-barrier-timeout", raw_.exit_barrier_timeout,
                                "Seconds node 0 waits, after the job ended, for every node to hear "
                                "it (default 300)",
                                shape);
    role_ = add("--role", raw_.role, "Worker role name (ROLE_NAME; default 'default')", shape);

    cluster_ =
        add("--cluster", raw_.cluster,
            "Read nnodes, node rank, master and run id from this launcher's environment: auto "
            "(default: Slurm step, mpirun or Kubernetes pod if found), slurm, mpi, k8s, none",
            shape)
            ->type_name("{auto,slurm,mpi,k8s,none}");
    agents_per_node_ =
        add("--agents-per-node", raw_.agents_per_node,
            "Agents allowed on one node (default 1: a second srun/mpirun task on a node is "
            "refused); with more, each agent is a node of its own on its own devices",
            shape);

    auto* ascend = "Ascend";
    soc_ = add("--soc", raw_.soc,
               "Enforce the device topology rules of a server series: atlas-training, atlas-a2, "
               "atlas-a3, none (default)",
               ascend)
               ->type_name("{atlas-training,atlas-a2,atlas-a3,none}");
    rank_table_ =
        add("--rank-table", raw_.rank_table,
            "HCCL rank table: a file to check against the job and export as RANK_TABLE_FILE, "
            "or auto to build one through the rendezvous",
            ascend)
            ->type_name("FILE");
    hccn_conf_ = add("--hccn-conf", raw_.hccn_conf,
                     "Device addresses for --rank-table auto (default $NPU_RUN_HCCN_CONF, else "
                     "/etc/hccn.conf)",
                     ascend)
                     ->type_name("FILE");

    auto* what = "What workers run";
    module_ =
        app_.add_flag("-m,--module", raw_.module, "Run SCRIPT as a module: python -u -m SCRIPT")
            ->envname("PET_MODULE")
            ->group(what);
    no_python_ = add_flag("--no-python", raw_.no_python,
                          "Run SCRIPT directly as an executable, without python", what);
    run_path_ =
        add_flag("--run-path", raw_.run_path,
                 "Accepted for torchrun compatibility; the script runs as python -u SCRIPT", what);
    start_method_ =
        add("--start-method", raw_.start_method,
            "Accepted for torchrun compatibility (spawn, fork, forkserver); ignored", what)
            ->type_name("{spawn,fork,forkserver}");

    auto* supervise = "Supervision";
    max_restarts_ =
        add("--max-restarts", raw_.max_restarts,
            "Restart the worker group up to N times after a failure (default 0)", supervise);
    monitor_interval_ =
        add("--monitor-interval", raw_.monitor_interval,
            "Accepted for torchrun compatibility; npu_run reacts to exits at once", supervise);
    term_timeout_ =
        app_.add_option("--term-timeout,--term_timeout,--shutdown-timeout,--shutdown_timeout",
                        raw_.term_timeout,
                        "Seconds between SIGTERM and SIGKILL when stopping workers "
                        "(default 30)")
            ->envname("PET_TERM_TIMEOUT")
            ->group(supervise);
    signals_ = add("--signals-to-handle", raw_.signals_to_handle,
                   "Signals that stop the job after forwarding them to workers (default "
                   "SIGTERM,SIGINT,SIGHUP,SIGQUIT); SIGUSR1/SIGUSR2 are otherwise forwarded only",
                   supervise);

    auto* logs = "Worker output";
    log_dir_ = add("--log-dir", raw_.log_dir,
                   "Write <dir>/<run_id>/attempt_<n>/<local_rank>/{stdout,stderr}.log (implies "
                   "--tee 3 unless -r/-t say otherwise)",
                   logs)
                   ->type_name("DIR");
    redirects_ =
        app_.add_option("-r,--redirects", raw_.redirects,
                        "Streams sent only to log files: 0 none, 1 stdout, 2 stderr, 3 both, "
                        "or per local rank like 0:3,12:1")
            ->envname("PET_REDIRECTS")
            ->group(logs);
    tee_ = app_.add_option("-t,--tee", raw_.tee,
                           "Streams written to log files and the console (same syntax as -r)")
               ->envname("PET_TEE")
               ->group(logs);
    filter_ = add("--local-ranks-filter", raw_.local_ranks_filter,
                  "Only these local ranks reach the console, e.g. 0 or 0,1 (others: log files "
                  "or nothing)",
                  logs);
    prefix_ = add("--log-line-prefix-template", raw_.prefix_template,
                  "Prefix of relayed console lines; ${rank} ${local_rank} ${node_rank} "
                  "${role_name} ${host} (default '[${rank}]: ' when teeing; '' for none)",
                  logs);

    auto* agent = "Agent";
    log_level_ = add("--log-level", raw_.log_level,
                     "Agent log level: trace, debug, info, warn, error, critical, off", agent)
                     ->type_name(kLogLevels);
    dry_run_ =
        add_flag("--dry-run", raw_.dry_run,
                 "Print the resolved plan (nodes, ranks, commands, environment) and exit", agent);
    json_ = add_flag("--json", raw_.json, "With --dry-run: print the plan as JSON", agent);
  }

  CLI::App& app() { return app_; }
  const CLI::App& app() const { return app_; }
  const RawFlags& raw() const { return raw_; }

  // The spelling the user typed ("-t", "--nproc_per_node"), or the PET_ variable the value came
  // from, so that messages point at what is actually on the user's screen.
  std::string source(const CLI::Option* opt) const {
    if (auto typed = typed_spelling(opt)) return *typed;
    if (!opt->get_envname().empty() && std::getenv(opt->get_envname().c_str()) != nullptr) {
      return opt->get_envname();
    }
    const auto& l = opt->get_lnames();
    return l.empty() ? "-" + opt->get_snames().front() : "--" + l.front();
  }

  bool given(const CLI::Option* opt) const { return opt->count() > 0; }

  void set_options_part(std::vector<std::string> options_part) {
    options_part_ = std::move(options_part);
  }

  // Every spelling this command line accepts, for "did you mean" hints.
  std::vector<std::string> all_names() const {
    std::vector<std::string> names;
    for (const CLI::Option* opt : app_.get_options()) {
      for (const auto& l : opt->get_lnames()) names.push_back("--" + l);
    }
    return names;
  }

  CLI::Option *nnodes_, *nproc_, *devices_, *node_rank_, *master_addr_, *master_port_, *local_addr_,
      *rdzv_backend_, *rdzv_endpoint_, *run_id_, *rdzv_conf_, *rdzv_token_, *rdzv_token_file_,
      *standalone_, *rdzv_timeout_, *rdzv_last_call_, *rdzv_backlog_, *heartbeat_interval_,
      *heartbeat_timeout_, *exit_barrier_timeout_, *role_, *module_, *no_python_, *run_path_,
      *start_method_, *max_restarts_, *monitor_interval_, *term_timeout_, *signals_, *log_dir_,
      *redirects_, *tee_, *filter_, *prefix_, *log_level_, *dry_run_, *json_, *soc_, *rank_table_,
      *hccn_conf_, *cluster_, *agents_per_node_;

 private:
  // Adds "--a-b" and "--a_b" spellings with env default PET_A_B.
  template <typename T>
  CLI::Option* add(const std::string& dashed, T& target, const std::string& help,
                   const char* group) {
    return app_.add_option(spellings(dashed), target, help)
        ->envname(env_name(dashed))
        ->group(group);
  }
  CLI::Option* add_flag(const std::string& dashed, bool& target, const std::string& help,
                        const char* group) {
    return app_.add_flag(spellings(dashed), target, help)->envname(env_name(dashed))->group(group);
  }
  static std::string spellings(const std::string& dashed) {
    std::string underscored = dashed;
    std::replace(underscored.begin() + 2, underscored.end(), '-', '_');
    return underscored == dashed ? dashed : dashed + "," + underscored;
  }
  static std::string env_name(const std::string& dashed) {
    std::string name = "PET_";
    for (char c : dashed.substr(2)) name += c == '-' ? '_' : static_cast<char>(std::toupper(c));
    return name;
  }
  std::optional<std::string> typed_spelling(const CLI::Option* opt) const {
    for (const std::string& token : options_part_) {
      if (token.size() < 2 || token[0] != '-') continue;
      if (token[1] == '-') {
        const std::string name = token.substr(2, token.find('=') - 2);
        if (opt->check_lname(name)) return "--" + name;
      } else if (opt->check_sname(token.substr(1, 1))) {
        return token.substr(0, 2);
      }
    }
    return std::nullopt;
  }

  CLI::App app_;
  RawFlags raw_;
  std::vector<std::string> options_part_;
};

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      const size_t up = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = up;
    }
  }
  return row[b.size()];
}

std::string unknown_option_message(const std::string& token, const CommandLine& cli) {
  const std::string name = token.substr(0, token.find('='));
  std::string best;
  size_t best_distance = 4;  // beyond 3 edits a suggestion is more confusing than helpful
  for (const auto& candidate : cli.all_names()) {
    const size_t d = edit_distance(name, candidate);
    if (d < best_distance) best = candidate, best_distance = d;
  }
  if (!best.empty()) return fmt::format("unknown option '{}'; did you mean '{}'?", name, best);
  return fmt::format(
      "unknown option '{}'; see 'npu_run --help' for the options (the training script must come "
      "after all npu_run options)",
      name);
}

int parse_positive(const std::string& text, int max, const std::string& source, const char* what) {
  const auto value = parse_integer(text, 1, max);
  if (!value)
    throw UsageError(fmt::format("{} '{}': expected {} between 1 and {}", source, text, what, max));
  return static_cast<int>(*value);
}

void parse_nnodes(const std::string& text, const std::string& source, LaunchConfig& cfg) {
  const auto colon = text.find(':');
  if (colon == std::string::npos) {
    cfg.min_nodes = cfg.max_nodes = parse_positive(text, kMaxNodes, source, "a node count");
    return;
  }
  cfg.min_nodes = parse_positive(text.substr(0, colon), kMaxNodes, source, "a minimum node count");
  cfg.max_nodes = parse_positive(text.substr(colon + 1), kMaxNodes, source, "a maximum node count");
  if (cfg.min_nodes > cfg.max_nodes) {
    throw UsageError(fmt::format("{} '{}': the minimum is above the maximum; write {}:{}", source,
                                 text, cfg.max_nodes, cfg.min_nodes));
  }
}

// Resolves nproc and the device of each local rank from --nproc-per-node and --devices.
// On a node with accelerators, --devices may only name ones that are there (and visible): a typo
// would otherwise surface minutes later as a driver error in every worker. A node without any
// (CPU jobs, tests) takes the ids as given.
void check_devices_present(const std::vector<int>& listed, const DiscoveredDevices& found,
                           const std::string& source, const std::string& text) {
  if (found.kind == DeviceKind::kNone || found.physical_ids.empty()) return;
  std::vector<int> absent;
  for (int id : listed) {
    if (std::find(found.physical_ids.begin(), found.physical_ids.end(), id) ==
        found.physical_ids.end())
      absent.push_back(id);
  }
  if (absent.empty()) return;
  throw UsageError(fmt::format("{} {}: this node has no device{} {} (found {}); pick ids from {}",
                               source, text, absent.size() == 1 ? "" : "s",
                               format_device_list(absent), found.description,
                               format_device_list(found.physical_ids)));
}

void resolve_workers_and_devices(const CommandLine& cli, const EnvMap& env, LaunchConfig& cfg) {
  const RawFlags& raw = cli.raw();
  const std::string nproc_src = cli.source(cli.nproc_);
  std::optional<std::vector<int>> listed;
  if (!raw.devices.empty()) {
    listed = parse_device_list(raw.devices, cli.source(cli.devices_));
    check_devices_present(*listed, discover_devices(env), cli.source(cli.devices_), raw.devices);
  }

  const std::string& n = raw.nproc_per_node;
  if (n == "auto" || n == "npu" || n == "gpu") {
    const DiscoveredDevices found = discover_devices(env);
    const bool wrong_kind = (n == "npu" && found.kind != DeviceKind::kAscend) ||
                            (n == "gpu" && found.kind != DeviceKind::kNvidia);
    if (listed) {
      cfg.nproc_per_node = static_cast<int>(listed->size());
      cfg.devices = *listed;
      cfg.devices_source = cli.source(cli.devices_);
    } else if (found.physical_ids.empty() || wrong_kind) {
      if (n != "auto") {
        throw UsageError(fmt::format("{} {}: {}; use a number, or auto to fall back to 1 worker",
                                     nproc_src, n, found.description));
      }
      cfg.nproc_per_node = 1;
      cfg.devices = {0};
      cfg.devices_source = found.description + "; 1 worker";
    } else {
      cfg.nproc_per_node = static_cast<int>(found.physical_ids.size());
      cfg.devices = found.physical_ids;
      cfg.devices_source = found.description;
    }
    return;
  }
  if (n == "cpu") {
    cfg.nproc_per_node = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  } else {
    const auto value = parse_integer(n, 1, kMaxWorkersPerNode);
    if (!value) {
      throw UsageError(fmt::format(
          "{} '{}': expected a number of workers between 1 and {}, or auto, npu, gpu, cpu",
          nproc_src, n, kMaxWorkersPerNode));
    }
    cfg.nproc_per_node = static_cast<int>(*value);
  }
  if (listed) {
    if (static_cast<int>(listed->size()) != cfg.nproc_per_node) {
      throw UsageError(fmt::format(
          "{} {} names {} device{} but {} is {}; list exactly {} device ids (e.g. --devices "
          "0-{}) or drop --devices",
          cli.source(cli.devices_), raw.devices, listed->size(), listed->size() == 1 ? "" : "s",
          nproc_src, n, cfg.nproc_per_node, cfg.nproc_per_node - 1));
    }
    cfg.devices = *listed;
    cfg.devices_source = cli.source(cli.devices_);
  } else {
    cfg.devices.resize(cfg.nproc_per_node);
    for (int i = 0; i < cfg.nproc_per_node; ++i) cfg.devices[i] = i;
    cfg.devices_source = "default 0..N-1";
  }
}

// HOST, HOST:PORT, [V6]:PORT.
void apply_rdzv_endpoint(const CommandLine& cli, LaunchConfig& cfg) {
  const std::string& ep = cli.raw().rdzv_endpoint;
  if (ep.empty()) return;
  const std::string src = cli.source(cli.rdzv_endpoint_);
  std::string host = ep;
  std::optional<int> port;
  const auto colon = ep.rfind(':');
  const bool bracketed = !ep.empty() && ep.front() == '[';
  if (bracketed) {
    const auto close = ep.find(']');
    if (close == std::string::npos) throw UsageError(fmt::format("{} '{}': missing ']'", src, ep));
    host = ep.substr(1, close - 1);
    if (close + 1 < ep.size()) {
      if (ep[close + 1] != ':')
        throw UsageError(fmt::format("{} '{}': expected [ADDR]:PORT", src, ep));
      port = parse_positive(ep.substr(close + 2), 65535, src, "a port");
    }
  } else if (colon != std::string::npos && ep.find(':') == colon) {
    host = ep.substr(0, colon);
    port = parse_positive(ep.substr(colon + 1), 65535, src, "a port");
  }
  if (host.empty())
    throw UsageError(fmt::format("{} '{}': the host is empty; write HOST:PORT", src, ep));
  if (cli.given(cli.master_addr_) && cli.raw().master_addr != host) {
    throw UsageError(fmt::format("{} '{}' and {} {} disagree about the rendezvous host; give one",
                                 src, ep, cli.source(cli.master_addr_), cli.raw().master_addr));
  }
  if (port && cli.given(cli.master_port_) && cli.raw().master_port != *port) {
    throw UsageError(fmt::format("{} '{}' and {} {} disagree about the rendezvous port; give one",
                                 src, ep, cli.source(cli.master_port_), cli.raw().master_port));
  }
  cfg.master_addr = host;
  if (port) cfg.master_port = *port;
}

std::map<std::string, std::string> parse_rdzv_conf(const std::string& text,
                                                   const std::string& src) {
  static const std::set<std::string> kKnown = {
      "timeout",      "join_timeout",        "last_call_timeout",      "close_timeout",
      "read_timeout", "keep_alive_interval", "keep_alive_max_attempt", "is_host"};
  std::map<std::string, std::string> conf;
  if (text.empty()) return conf;
  for (const std::string_view item : split(text, ',')) {
    const auto eq = item.find('=');
    if (eq == std::string_view::npos || eq == 0) {
      throw UsageError(fmt::format("{} '{}': item '{}' is not key=value", src, text, item));
    }
    const std::string key(item.substr(0, eq));
    if (!kKnown.count(key)) {
      throw UsageError(fmt::format("{} '{}': unknown key '{}'; known keys: {}", src, text, key,
                                   fmt::join(kKnown, ", ")));
    }
    conf[key] = std::string(item.substr(eq + 1));
  }
  return conf;
}

std::vector<int> parse_signals(const std::string& text, const std::string& src) {
  static const std::map<std::string, int> kHandled = {{"TERM", SIGTERM}, {"INT", SIGINT},
                                                      {"HUP", SIGHUP},   {"QUIT", SIGQUIT},
                                                      {"USR1", SIGUSR1}, {"USR2", SIGUSR2}};
  std::vector<int> signals;
  for (std::string_view item : split(text, ',')) {
    if (item.substr(0, 3) == "SIG") item.remove_prefix(3);
    const std::string name(item);
    const auto it = kHandled.find(name);
    if (it == kHandled.end()) {
      throw UsageError(
          fmt::format("{} '{}': cannot handle '{}'; choose from SIGTERM, SIGINT, "
                      "SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2",
                      src, text, name));
    }
    if (std::find(signals.begin(), signals.end(), it->second) == signals.end())
      signals.push_back(it->second);
  }
  return signals;
}

std::set<int> parse_rank_filter(const std::string& text, const std::string& src, int nproc) {
  std::set<int> ranks;
  for (const std::string_view item : split(text, ',')) {
    const auto parsed = parse_integer(item, 0, kMaxWorkersPerNode);
    if (!parsed) {
      throw UsageError(fmt::format("{} '{}': '{}' is not a local rank; write ranks like 0 or 0,1",
                                   src, text, item));
    }
    const int rank = static_cast<int>(*parsed);
    if (rank >= nproc) {
      throw UsageError(
          fmt::format("{} '{}': local rank {} does not exist with {} worker{} per node", src, text,
                      rank, nproc, nproc == 1 ? "" : "s"));
    }
    ranks.insert(rank);
  }
  return ranks;
}

// Looks `name` up like execvp would, in the agent's PATH; empty when not found.
std::string find_program(const std::string& name, const EnvMap& env) {
  if (name.find('/') != std::string::npos) {
    return ::access(name.c_str(), X_OK) == 0 ? fs::absolute(name).lexically_normal().string() : "";
  }
  const std::string path = lookup(env, "PATH").value_or("/usr/local/bin:/usr/bin:/bin");
  size_t pos = 0;
  while (pos <= path.size()) {
    const auto colon = std::min(path.find(':', pos), path.size());
    const std::string dir = colon == pos ? "." : path.substr(pos, colon - pos);
    pos = colon + 1;
    const fs::path candidate = fs::path(dir) / name;
    std::error_code ec;
    if (fs::is_regular_file(candidate, ec) && ::access(candidate.c_str(), X_OK) == 0) {
      return fs::absolute(candidate).lexically_normal().string();
    }
  }
  return "";
}

void resolve_program(const CommandLine& cli, const std::vector<std::string>& remaining,
                     const EnvMap& env, LaunchConfig& cfg) {
  const RawFlags& raw = cli.raw();
  if (raw.no_python && raw.module) {
    throw UsageError(
        "--no-python and --module cannot be combined: a module needs python; drop one");
  }
  if (raw.no_python && raw.run_path) {
    throw UsageError(
        "--no-python and --run-path cannot be combined: --run-path runs python; drop one");
  }
  cfg.mode = raw.no_python ? WorkerMode::kExecutable
             : raw.module  ? WorkerMode::kPythonModule
                           : WorkerMode::kPythonScript;
  cfg.entrypoint = remaining.front();
  cfg.args.assign(remaining.begin() + 1, remaining.end());

  if (cfg.mode == WorkerMode::kExecutable) {
    cfg.program = find_program(cfg.entrypoint, env);
    if (cfg.program.empty()) {
      throw UsageError(fmt::format(
          "--no-python: '{}' is not an executable file{}; check the path and its execute "
          "permission",
          cfg.entrypoint, cfg.entrypoint.find('/') == std::string::npos ? " on PATH" : ""));
    }
    return;
  }
  const std::string python = lookup(env, "PYTHON_EXEC").value_or("python3");
  cfg.program = find_program(python, env);
  if (cfg.program.empty()) {
    throw UsageError(fmt::format(
        "cannot find the python interpreter '{}'{} (from {}); set PYTHON_EXEC to a python that "
        "has your framework installed, e.g. PYTHON_EXEC=/usr/bin/python3",
        python, python.find('/') == std::string::npos ? " on PATH" : "",
        lookup(env, "PYTHON_EXEC") ? "PYTHON_EXEC" : "the default python3"));
  }
  if (cfg.mode == WorkerMode::kPythonScript) {
    std::error_code ec;
    if (!fs::is_regular_file(cfg.entrypoint, ec)) {
      throw UsageError(fmt::format(
          "training script '{}' not found (working directory {}); give its path, or use -m for "
          "a module or --no-python for a program",
          cfg.entrypoint, fs::current_path(ec).string()));
    }
  }
}

void resolve_outputs(const CommandLine& cli, LaunchConfig& cfg) {
  const RawFlags& raw = cli.raw();
  cfg.redirects = RankStreamMap::parse(raw.redirects, cli.source(cli.redirects_));
  cfg.tee = RankStreamMap::parse(raw.tee, cli.source(cli.tee_));
  for (const auto& [map, opt] :
       {std::pair{&cfg.redirects, cli.redirects_}, std::pair{&cfg.tee, cli.tee_}}) {
    if (map->highest_named_rank() >= cfg.nproc_per_node) {
      throw UsageError(
          fmt::format("{} '{}': local rank {} does not exist with {} worker{} per node",
                      cli.source(opt), opt->as<std::string>(), map->highest_named_rank(),
                      cfg.nproc_per_node, cfg.nproc_per_node == 1 ? "" : "s"));
    }
  }
  if (!raw.log_dir.empty()) {
    cfg.log_dir = raw.log_dir;
    // Asking for a log directory is asking for files: all streams, unless -r/-t chose some.
    if (cfg.redirects.empty() && cfg.tee.empty()) cfg.tee = RankStreamMap(StdStreams::kBoth);
  } else if (!cfg.redirects.empty() || !cfg.tee.empty()) {
    cfg.log_dir_is_temporary = true;  // as torchrun: files go to a fresh directory under $TMPDIR
  }
  if (!raw.local_ranks_filter.empty()) {
    cfg.local_ranks_filter =
        parse_rank_filter(raw.local_ranks_filter, cli.source(cli.filter_), cfg.nproc_per_node);
  }
  if (cli.given(cli.prefix_)) {
    validate_prefix_template(raw.prefix_template, cli.source(cli.prefix_));
    cfg.prefix_template = raw.prefix_template;
  }
}

std::chrono::milliseconds seconds_option(double value, double min, double max,
                                         const std::string& source) {
  if (!(value >= min) || value > max) {
    throw UsageError(
        fmt::format("{} {}: expected seconds between {} and {}", source, value, min, max));
  }
  return std::chrono::milliseconds(std::llround(value * 1000));
}

// A number from --rdzv-conf key=value, named as the user wrote it when it is wrong.
double conf_number(const LaunchConfig& cfg, const std::string& key, const std::string& source) {
  const std::string& text = cfg.rdzv_conf.at(key);
  char* end = nullptr;
  const double value = std::strtod(text.c_str(), &end);
  if (text.empty() || *end != '\0') {
    throw UsageError(fmt::format("{} {}={}: expected a number", source, key, text));
  }
  return value;
}

// Flags win over --rdzv-conf keys (torchrun's spelling of the same settings), which win over
// the defaults.
void resolve_rendezvous_settings(const CommandLine& cli, LaunchConfig& cfg) {
  const RawFlags& raw = cli.raw();
  const std::string conf_src = cli.source(cli.rdzv_conf_);
  double rdzv_timeout = raw.rdzv_timeout;
  std::string timeout_src = cli.source(cli.rdzv_timeout_);
  if (!cli.given(cli.rdzv_timeout_)) {
    for (const char* key : {"timeout", "join_timeout"}) {
      if (cfg.rdzv_conf.count(key)) {
        rdzv_timeout = conf_number(cfg, key, conf_src);
        timeout_src = fmt::format("{} {}", conf_src, key);
      }
    }
  }
  cfg.rdzv_timeout = seconds_option(rdzv_timeout, 1, 7 * 24 * 3600.0, timeout_src);
  double last_call = raw.rdzv_last_call;
  std::string last_call_src = cli.source(cli.rdzv_last_call_);
  if (!cli.given(cli.rdzv_last_call_) && cfg.rdzv_conf.count("last_call_timeout")) {
    last_call = conf_number(cfg, "last_call_timeout", conf_src);
    last_call_src = conf_src + " last_call_timeout";
  }
  cfg.rdzv_last_call = seconds_option(last_call, 0, 24 * 3600.0, last_call_src);
  if (cfg.rdzv_conf.count("read_timeout")) {
    cfg.rdzv_handshake_timeout = seconds_option(conf_number(cfg, "read_timeout", conf_src), 0.1,
                                                3600, conf_src + " read_timeout");
  }

  double interval = raw.heartbeat_interval;
  std::string interval_src = cli.source(cli.heartbeat_interval_);
  if (!cli.given(cli.heartbeat_interval_) && cfg.rdzv_conf.count("keep_alive_interval")) {
    interval = conf_number(cfg, "keep_alive_interval", conf_src);
    interval_src = conf_src + " keep_alive_interval";
  }
  cfg.heartbeat_interval = seconds_option(interval, 0.05, 3600, interval_src);
  double timeout = raw.heartbeat_timeout;
  std::string hb_timeout_src = cli.source(cli.heartbeat_timeout_);
  if (!cli.given(cli.heartbeat_timeout_) && cfg.rdzv_conf.count("keep_alive_max_attempt")) {
    timeout = interval * conf_number(cfg, "keep_alive_max_attempt", conf_src);
    hb_timeout_src = conf_src + " keep_alive_max_attempt";
  }
  cfg.heartbeat_timeout = seconds_option(timeout, 0.1, 24 * 3600.0, hb_timeout_src);
  if (cfg.heartbeat_timeout <= cfg.heartbeat_interval) {
    throw UsageError(
        fmt::format("{} {} must be longer than {} {}, or every node counts as lost between two "
                    "heartbeats",
                    hb_timeout_src, timeout, interval_src, interval));
  }
  cfg.exit_barrier_timeout = seconds_option(raw.exit_barrier_timeout, 0, 7 * 24 * 3600.0,
                                            cli.source(cli.exit_barrier_timeout_));
  if (raw.rdzv_backlog < 0 || raw.rdzv_backlog > 1'000'000) {
    throw UsageError(fmt::format("{} {}: expected 0 (the kernel's somaxconn) up to 1000000",
                                 cli.source(cli.rdzv_backlog_), raw.rdzv_backlog));
  }
  cfg.rdzv_backlog = raw.rdzv_backlog;
}

// Run ids and roles name directories and appear in messages: keep them to a safe alphabet.
void check_name(const std::string& value, const std::string& source, const char* what) {
  const bool ok = !value.empty() && value != "." && value != ".." &&
                  std::all_of(value.begin(), value.end(), [](unsigned char c) {
                    return std::isalnum(c) || c == '-' || c == '_' || c == '.';
                  });
  if (!ok) {
    throw UsageError(fmt::format("{} '{}': {} may use only letters, digits, '-', '_' and '.'",
                                 source, value, what));
  }
}

// --soc, --rank-table and --hccn-conf: everything that can be checked before the rendezvous.
void resolve_ascend(const CommandLine& cli, const EnvMap& env, LaunchConfig& cfg) {
  const RawFlags& raw = cli.raw();
  cfg.soc = parse_soc(raw.soc, cli.source(cli.soc_));
  check_server_devices(cfg.soc, cfg.devices);
  cfg.hccn_conf = !raw.hccn_conf.empty()
                      ? raw.hccn_conf
                      : lookup(env, "NPU_RUN_HCCN_CONF").value_or(kDefaultHccnConf);
  if (raw.rank_table.empty()) {
    if (cli.given(cli.hccn_conf_))
      throw UsageError("--hccn-conf is read by --rank-table auto; add --rank-table auto");
    return;
  }
  cfg.rank_table = raw.rank_table;
  if (raw.rank_table == "auto") {
    const auto ips = read_hccn_conf(cfg.hccn_conf);
    std::vector<std::string> missing;
    for (int device : cfg.devices) {
      const auto ip = ips.find(device);
      if (ip == ips.end())
        missing.push_back(fmt::format("address_{}", device));
      else
        cfg.device_ips.push_back(ip->second);
    }
    if (!missing.empty()) {
      throw UsageError(fmt::format(
          "--rank-table auto: {} has no {} for this node's devices {}; add the line(s) or "
          "point --hccn-conf at the right file",
          cfg.hccn_conf, fmt::join(missing, ", "), format_device_list(cfg.devices)));
    }
    return;
  }
  // A given table is read now, so a broken file stops the launch before any node joins;
  // whether it fits this node's ranks is checked once the rendezvous has assigned them.
  const RankTable table = read_rank_table(raw.rank_table);
  if (table.device_count() == 0)
    throw UsageError(fmt::format("--rank-table {}: the table lists no devices", raw.rank_table));
  std::error_code ec;
  cfg.rank_table = std::filesystem::absolute(raw.rank_table, ec).lexically_normal().string();
}

// Token precedence: a file, else the flag or NPU_RUN_RDZV_TOKEN, else (multi-node Slurm step) one
// derived for the job; a single-node job has no network rendezvous and needs none.
void resolve_token(const CommandLine& cli, const EnvMap& env, const ClusterDefaults& cluster,
                   LaunchConfig& cfg) {
  const RawFlags& raw = cli.raw();
  if (cli.given(cli.rdzv_token_file_) && cli.given(cli.rdzv_token_)) {
    throw UsageError(fmt::format("{} and {} both give a rendezvous token; keep one",
                                 cli.source(cli.rdzv_token_file_), cli.source(cli.rdzv_token_)));
  }
  if (cli.given(cli.rdzv_token_file_)) {
    cfg.rdzv_token = read_token_file(raw.rdzv_token_file, cli.source(cli.rdzv_token_file_));
    cfg.rdzv_token_source = cli.source(cli.rdzv_token_file_) + " " + raw.rdzv_token_file;
  } else if (cli.given(cli.rdzv_token_)) {
    if (raw.rdzv_token.empty()) {
      throw UsageError(fmt::format("{} is empty; give a secret, or unset it for no token",
                                   cli.source(cli.rdzv_token_)));
    }
    if (raw.rdzv_token.size() > kMaxTokenBytes) {
      throw UsageError(
          fmt::format("{} is longer than {} bytes", cli.source(cli.rdzv_token_), kMaxTokenBytes));
    }
    cfg.rdzv_token = raw.rdzv_token;
    cfg.rdzv_token_source = cli.source(cli.rdzv_token_);
  } else if (cluster.kind == ClusterKind::kSlurm && cfg.max_nodes > 1 && cluster.run_id) {
    // Derived when the agent starts (launch), not here: parsing (and --dry-run) creates no files.
    const auto secret = user_secret_path(env);
    if (!secret) {
      cfg.cluster_warnings.push_back(fmt::format(
          "no rendezvous token: neither HOME nor XDG_CONFIG_HOME is set, so there is no secret to "
          "derive one for this Slurm step from; give one with --rdzv-token-file or {}",
          kTokenVariable));
      return;
    }
    cfg.rdzv_token_secret = *secret;
    cfg.rdzv_token_job = *cluster.run_id;
    cfg.rdzv_token_source =
        fmt::format("derived for Slurm step {} from {}", *cluster.run_id, *secret);
  }
}

void validate_identity(const CommandLine& cli, LaunchConfig& cfg) {
  const RawFlags& raw = cli.raw();
  check_name(raw.run_id, cli.source(cli.run_id_), "a run id (it names the log directory)");
  check_name(raw.role, cli.source(cli.role_), "a role name");
  cfg.run_id = raw.run_id;
  cfg.role = raw.role;
}

LaunchConfig validate(const CommandLine& cli, const std::vector<std::string>& remaining,
                      const EnvMap& env) {
  const RawFlags& raw = cli.raw();
  LaunchConfig cfg;
  if (raw.agents_per_node < 1 || raw.agents_per_node > 1024) {
    throw UsageError(fmt::format("{} {}: expected 1 to 1024", cli.source(cli.agents_per_node_),
                                 raw.agents_per_node));
  }
  cfg.agents_per_node = raw.agents_per_node;
  // A launcher's environment gives defaults; flags and PET_ variables (given()) win.
  const ClusterDefaults cluster = detect_cluster(
      env, parse_cluster_kind(raw.cluster, cli.source(cli.cluster_)), raw.agents_per_node);
  cfg.cluster_description = cluster.description;
  cfg.cluster_detected = cluster.detected;
  cfg.cluster_warnings = cluster.warnings;
  cfg.stop_with_parent = cluster.kind == ClusterKind::kMpi || cluster.kind == ClusterKind::kSlurm;
  if (!cli.given(cli.nnodes_) && cluster.nnodes) {
    cfg.min_nodes = cfg.max_nodes = *cluster.nnodes;
  } else {
    parse_nnodes(raw.nnodes, cli.source(cli.nnodes_), cfg);
  }
  resolve_workers_and_devices(cli, env, cfg);
  if (cluster.agent_index > 0 && !cli.given(cli.devices_) &&
      cfg.devices_source == "default 0..N-1") {
    // Agents sharing a node take consecutive slices of its devices.
    for (int& d : cfg.devices) d += cluster.agent_index * cfg.nproc_per_node;
    cfg.devices_source = fmt::format("slice {} of the node's devices (--agents-per-node {})",
                                     cluster.agent_index, raw.agents_per_node);
  }

  if (raw.standalone) {
    if (cfg.max_nodes > 1) {
      throw UsageError(fmt::format("--standalone runs a single node but {} is {}; drop one of them",
                                   cli.source(cli.nnodes_), raw.nnodes));
    }
    cfg.standalone = true;
  }
  if (!cli.given(cli.node_rank_) && cluster.node_rank) {
    if (*cluster.node_rank >= cfg.max_nodes) {
      throw UsageError(fmt::format(
          "{}: node rank {} is not below nnodes {}; the scheduler's variables disagree (a step "
          "environment copied into another job?): start npu_run with srun inside the allocation, "
          "or give --nnodes and --node-rank yourself",
          cluster.description, *cluster.node_rank, cfg.max_nodes));
    }
    cfg.node_rank = cluster.node_rank;
  } else if (cli.given(cli.node_rank_)) {
    if (raw.node_rank < 0 || raw.node_rank >= cfg.max_nodes) {
      throw UsageError(fmt::format("{} {}: node ranks run from 0 to {} with --nnodes {}",
                                   cli.source(cli.node_rank_), raw.node_rank, cfg.max_nodes - 1,
                                   raw.nnodes));
    }
    cfg.node_rank = raw.node_rank;
  }
  if (raw.master_addr.empty()) {
    throw UsageError(fmt::format("{} is empty; give the host or IP address of node 0",
                                 cli.source(cli.master_addr_)));
  }
  cfg.master_addr =
      !cli.given(cli.master_addr_) && cluster.master_addr ? *cluster.master_addr : raw.master_addr;
  if (raw.master_port < 1 || raw.master_port > 65535) {
    throw UsageError(fmt::format("{} {}: a port must be between 1 and 65535",
                                 cli.source(cli.master_port_), raw.master_port));
  }
  cfg.master_port =
      !cli.given(cli.master_port_) && cluster.master_port ? *cluster.master_port : raw.master_port;
  apply_rdzv_endpoint(cli, cfg);
  if (!raw.local_addr.empty()) cfg.local_addr = raw.local_addr;
  static const std::set<std::string> kBackends = {"static", "c10d", "etcd", "etcd-v2"};
  if (!kBackends.count(raw.rdzv_backend)) {
    throw UsageError(fmt::format("{} '{}': expected static, c10d, etcd or etcd-v2",
                                 cli.source(cli.rdzv_backend_), raw.rdzv_backend));
  }
  cfg.rdzv_backend = raw.rdzv_backend;
  cfg.rdzv_conf = parse_rdzv_conf(raw.rdzv_conf, cli.source(cli.rdzv_conf_));
  resolve_rendezvous_settings(cli, cfg);
  validate_identity(cli, cfg);
  if (!cli.given(cli.run_id_) && cluster.run_id) cfg.run_id = *cluster.run_id;
  resolve_token(cli, env, cluster, cfg);

  if (raw.max_restarts < 0) {
    throw UsageError(
        fmt::format("{} {}: must be 0 or more", cli.source(cli.max_restarts_), raw.max_restarts));
  }
  cfg.max_restarts = raw.max_restarts;
  if (!(raw.monitor_interval >= 0)) {
    throw UsageError(fmt::format("{} {}: must be 0 or more seconds",
                                 cli.source(cli.monitor_interval_), raw.monitor_interval));
  }
  static const std::set<std::string> kStartMethods = {"spawn", "fork", "forkserver"};
  if (!kStartMethods.count(raw.start_method)) {
    throw UsageError(fmt::format("{} '{}': expected spawn, fork or forkserver",
                                 cli.source(cli.start_method_), raw.start_method));
  }
  cfg.term_timeout =
      seconds_option(raw.term_timeout, 0, 7 * 24 * 3600.0, cli.source(cli.term_timeout_));
  cfg.stop_signals = parse_signals(raw.signals_to_handle, cli.source(cli.signals_));

  static const std::set<std::string> kLevels = {"trace",   "debug", "info",     "warn",
                                                "warning", "error", "critical", "off"};
  if (!kLevels.count(raw.log_level)) {
    throw UsageError(
        fmt::format("{} '{}': expected trace, debug, info, warn, error, critical or off",
                    cli.source(cli.log_level_), raw.log_level));
  }
  cfg.log_level = raw.log_level == "warning" ? "warn" : raw.log_level;
  if (raw.json && !raw.dry_run)
    throw UsageError("--json only changes the output of --dry-run; add --dry-run");
  cfg.dry_run = raw.dry_run;
  cfg.json = raw.json;

  resolve_ascend(cli, env, cfg);
  resolve_outputs(cli, cfg);
  resolve_program(cli, remaining, env, cfg);
  return cfg;
}

// Adds "PET_X=... is set" when the failing option has a PET_ variable in the environment, since
// a stale exported variable is a common and puzzling cause.
std::string env_hint(const CommandLine& cli, const std::string& message) {
  std::string hint;
  for (const CLI::Option* opt : cli.app().get_options()) {
    const std::string& env_name = opt->get_envname();
    if (env_name.empty()) continue;
    const char* value = std::getenv(env_name.c_str());
    if (value == nullptr) continue;
    for (const auto& l : opt->get_lnames()) {
      if (message.find("--" + l) != std::string::npos) {
        hint = fmt::format(" (note: {}={} is set in the environment)", env_name, value);
      }
    }
  }
  return hint;
}

EarlyExit usage_error(const std::string& message) {
  return EarlyExit{
      kExitUsage,
      fmt::format("npu_run: error: {}\nRun 'npu_run --help' for the options.\n", message), true};
}

}  // namespace

std::string worker_mode_name(WorkerMode mode) {
  switch (mode) {
    case WorkerMode::kPythonScript:
      return "python script";
    case WorkerMode::kPythonModule:
      return "python module";
    case WorkerMode::kExecutable:
      return "executable";
  }
  return "unknown";
}

ParseResult parse_command_line(const std::vector<std::string>& args, const EnvMap& env) {
  CommandLine cli;
  try {
    // CLI11 wants the arguments reversed when given as a vector.
    std::vector<std::string> reversed(args.rbegin(), args.rend());
    cli.app().parse(reversed);
  } catch (const CLI::CallForHelp&) {
    return EarlyExit{0, cli.app().help(), false};
  } catch (const CLI::CallForVersion&) {
    return EarlyExit{0, std::string("npu_run ") + kVersion + "\n", false, true};
  } catch (const CLI::ParseError& e) {
    std::string what = e.what();
    return usage_error(what + env_hint(cli, what));
  }

  std::vector<std::string> remaining = cli.app().remaining();
  cli.set_options_part({args.begin(), args.end() - static_cast<std::ptrdiff_t>(remaining.size())});
  // "npu_run [OPTIONS] -- SCRIPT": after the separator even a name starting with '-' is the script.
  const bool after_separator = !remaining.empty() && remaining.front() == "--";
  if (after_separator) remaining.erase(remaining.begin());
  if (remaining.empty()) {
    return usage_error("no training script given; usage: npu_run [OPTIONS] SCRIPT [ARGS...]");
  }
  // With prefix_command(), an unknown option ends parsing just like the script would.
  if (!after_separator && remaining.front().size() > 1 && remaining.front()[0] == '-') {
    return usage_error(unknown_option_message(remaining.front(), cli));
  }
  try {
    return validate(cli, remaining, env);
  } catch (const UsageError& e) {
    return usage_error(e.what());
  }
}

// The raw values of `npu_run rdzv-server`, as CLI11 fills them.
struct ServerRaw {
  std::string host = "0.0.0.0";
  int port = 29500;
  std::string nnodes = "1";
  std::string run_id = "none";
  int max_restarts = 0;
  double rdzv_timeout = 900;
  double last_call = 30;
  int backlog = 0;
  double heartbeat_interval = 5;
  double heartbeat_timeout = 30;
  double exit_barrier_timeout = 300;
  std::string log_level = "info";
  std::string token;
  std::string token_file;
  double handshake_timeout = 10;
  CLI::Option* token_opt = nullptr;
  CLI::Option* token_file_opt = nullptr;
};

std::unique_ptr<CLI::App> server_app(ServerRaw& raw) {
  auto app = std::make_unique<CLI::App>(
      "npu_run rdzv-server --port PORT --nnodes N [OPTIONS]\n\nRun the rendezvous server alone, on "
      "a "
      "host of its own; every agent then joins it with --master-addr/--master-port.",
      "npu_run rdzv-server");
  app->add_option("--port,--master-port,--master_port", raw.port, "Port to listen on")->required();
  app->add_option("--handshake-timeout,--handshake_timeout", raw.handshake_timeout,
                  "Seconds a new connection has to say hello and prove the token (default 10)");
  raw.token_opt = app->add_option("--rdzv-token,--rdzv_token", raw.token,
                                  "The agents' rendezvous token (prefer NPU_RUN_RDZV_TOKEN)")
                      ->envname(kTokenVariable);
  raw.token_file_opt = app->add_option("--rdzv-token-file,--rdzv_token_file", raw.token_file,
                                       "File holding the agents' rendezvous token (mode 600)")
                           ->type_name("FILE");
  app->add_option("--host", raw.host, "Address to listen on (default 0.0.0.0: every IPv4 address)");
  app->add_option("--nnodes", raw.nnodes, "Number of nodes, as the agents' --nnodes")->required();
  app->add_option("--run-id,--run_id,--rdzv-id,--rdzv_id", raw.run_id, "The agents' --run-id");
  app->add_option("--max-restarts,--max_restarts", raw.max_restarts, "The agents' --max-restarts");
  app->add_option("--rdzv-timeout,--rdzv_timeout", raw.rdzv_timeout,
                  "Seconds for all nodes to join");
  app->add_option("--rdzv-last-call,--rdzv_last_call", raw.last_call,
                  "Elastic MIN:MAX: seconds to wait for more nodes once MIN joined (default 30)");
  app->add_option("--rdzv-backlog,--rdzv_backlog", raw.backlog,
                  "Listen backlog (default somaxconn)");
  app->add_option("--heartbeat-interval,--heartbeat_interval", raw.heartbeat_interval,
                  "Seconds between agents' heartbeats");
  app->add_option("--heartbeat-timeout,--heartbeat_timeout", raw.heartbeat_timeout,
                  "Seconds of silence after which a node is lost");
  app->add_option("--exit-barrier-timeout,--exit_barrier_timeout", raw.exit_barrier_timeout,
                  "Seconds to wait for agents to hear the end of the job");
  app->add_option("--log-level,--log_level", raw.log_level,
                  "trace, debug, info, warn, error, critical, off")
      ->type_name(kLogLevels);
  return app;
}

std::variant<ServerCommand, EarlyExit> parse_server_command(const std::vector<std::string>& args) {
  ServerRaw raw;
  const auto app_owner = server_app(raw);
  CLI::App& app = *app_owner;
  auto& [host, port, nnodes, run_id, max_restarts, rdzv_timeout, last_call, backlog,
         heartbeat_interval, heartbeat_timeout, exit_barrier_timeout, log_level, token, token_file,
         handshake_timeout, token_opt, token_file_opt] = raw;
  try {
    std::vector<std::string> reversed(args.rbegin(), args.rend());
    app.parse(reversed);
  } catch (const CLI::CallForHelp&) {
    return EarlyExit{0, app.help(), false};
  } catch (const CLI::ParseError& e) {
    return usage_error(std::string(e.what()) + " (npu_run rdzv-server)");
  }
  try {
    ServerCommand cmd;
    LaunchConfig shape;
    parse_nnodes(nnodes, "--nnodes", shape);
    cmd.settings.min_nodes = shape.min_nodes;
    cmd.settings.max_nodes = shape.max_nodes;
    if (port < 1 || port > 65535)
      throw UsageError(fmt::format("--port {}: a port must be between 1 and 65535", port));
    cmd.options.port = port;
    boost::system::error_code ec;
    boost::asio::ip::make_address(host, ec);
    if (ec)
      throw UsageError(
          fmt::format("--host '{}': expected an IP address of this host (or 0.0.0.0 / ::)", host));
    cmd.options.bind_addr = host;
    if (backlog < 0) throw UsageError(fmt::format("--rdzv-backlog {}: must be 0 or more", backlog));
    cmd.options.backlog = backlog;
    cmd.options.exit_barrier_timeout =
        seconds_option(exit_barrier_timeout, 0, 7 * 24 * 3600.0, "--exit-barrier-timeout");
    cmd.options.handshake_timeout =
        seconds_option(handshake_timeout, 0.1, 3600, "--handshake-timeout");
    check_name(run_id, "--run-id", "a run id");
    cmd.settings.run_id = run_id;
    if (token_opt->count() > 0 && token_file_opt->count() > 0)
      throw UsageError("--rdzv-token and --rdzv-token-file both give a token; keep one");
    if (token_file_opt->count() > 0) {
      cmd.settings.token = read_token_file(token_file, "--rdzv-token-file");
    } else if (token_opt->count() > 0) {
      if (token.empty() || token.size() > kMaxTokenBytes)
        throw UsageError(fmt::format(
            "--rdzv-token (or {}) must be 1 to {} bytes; give the same token as the agents",
            kTokenVariable, kMaxTokenBytes));
      cmd.settings.token = token;
    }
    if (max_restarts < 0)
      throw UsageError(fmt::format("--max-restarts {}: must be 0 or more", max_restarts));
    cmd.settings.max_restarts = max_restarts;
    cmd.settings.join_timeout = seconds_option(rdzv_timeout, 1, 7 * 24 * 3600.0, "--rdzv-timeout");
    cmd.settings.last_call = seconds_option(last_call, 0, 24 * 3600.0, "--rdzv-last-call");
    cmd.settings.heartbeat_interval =
        seconds_option(heartbeat_interval, 0.05, 3600, "--heartbeat-interval");
    cmd.settings.heartbeat_timeout =
        seconds_option(heartbeat_timeout, 0.1, 24 * 3600.0, "--heartbeat-timeout");
    if (cmd.settings.heartbeat_timeout <= cmd.settings.heartbeat_interval) {
      throw UsageError("--heartbeat-timeout must be longer than --heartbeat-interval");
    }
    static const std::set<std::string> kLevels = {"trace", "debug",    "info", "warn",
                                                  "error", "critical", "off"};
    if (!kLevels.count(log_level))
      throw UsageError(fmt::format(
          "--log-level '{}': expected one of trace, debug, info, warn, error, critical, off",
          log_level));
    cmd.log_level = log_level;
    return cmd;
  } catch (const UsageError& e) {
    return usage_error(std::string(e.what()) + " (npu_run rdzv-server)");
  }
}

// The raw values of `npu_run rank-table`, as CLI11 fills them.
struct RankTableRaw {
  RankTableCommand cmd;
  std::string devices;
  std::string device_ips;
  std::string super_device_ids;
};

std::unique_ptr<CLI::App> rank_table_app(RankTableRaw& raw) {
  auto app = std::make_unique<CLI::App>(
      "npu_run rank-table [--devices IDS] [OPTIONS]\n       npu_run rank-table --merge A.json "
      "B.json ... [-o FILE]\n\n"
      "Write the HCCL rank table (RANK_TABLE_FILE) of this server, as hccl_tools.py does, or merge "
      "the tables "
      "of several servers into one, renumbering rank ids in the order given.",
      "npu_run rank-table");
  RankTableCommand& cmd = raw.cmd;
  app->add_option("--devices,--device_num", raw.devices,
                  "Physical device ids in rank order: 0-7, 0,2,4,6 or the classic [0,8) (default: "
                  "the NPUs found)");
  app->add_option(
         "--hccn-conf,--hccn_conf", cmd.hccn_conf,
         "File with the devices' addresses (default $NPU_RUN_HCCN_CONF, else /etc/hccn.conf)")
      ->type_name("FILE");
  app->add_option("--device-ips,--device_ips", raw.device_ips,
                  "Device addresses in device order, instead of hccn.conf");
  app->add_option("--server-id,--server_id,--server-ip,--server_ip", cmd.server_id,
                  "server_id of this server (default: this host's primary address)");
  app->add_option("-o,--output", cmd.output,
                  "Output file (default: hccl_<n>p_<ids>_<server>.json; - for stdout)")
      ->type_name("FILE");
  app->add_option("--version", cmd.version,
                  "Rank table version: 1.0, or 1.2 for Atlas A3 SuperPoDs")
      ->type_name("{1.0,1.2}");
  app->add_option("--super-pod-id,--super_pod_id", cmd.super_pod_id,
                  "1.2: the SuperPoD of this server (default 0)");
  app->add_option("--super-device-ids,--super_device_ids", raw.super_device_ids,
                  "1.2: each device's super device id (SDID), in device order");
  app->add_option("--merge", cmd.merge_inputs, "Merge these rank tables, in this order")
      ->expected(1, -1)
      ->type_name("FILE");
  return app;
}

std::variant<RankTableCommand, EarlyExit> parse_rank_table_command(
    const std::vector<std::string>& args, const EnvMap& env) {
  RankTableRaw raw;
  const auto app_owner = rank_table_app(raw);
  CLI::App& app = *app_owner;
  RankTableCommand& cmd = raw.cmd;
  auto& [unused_cmd, devices, device_ips, super_device_ids] = raw;
  (void)unused_cmd;
  try {
    std::vector<std::string> reversed(args.rbegin(), args.rend());
    app.parse(reversed);
  } catch (const CLI::CallForHelp&) {
    return EarlyExit{0, app.help(), false};
  } catch (const CLI::ParseError& e) {
    return usage_error(std::string(e.what()) + " (npu_run rank-table)");
  }
  try {
    if (cmd.version != "1.0" && cmd.version != "1.2") {
      throw UsageError(fmt::format(
          "--version '{}': rank tables are 1.0, or 1.2 for Atlas A3 SuperPoDs", cmd.version));
    }
    if (!cmd.merge_inputs.empty()) {
      if (!devices.empty() || !device_ips.empty() || !cmd.server_id.empty()) {
        throw UsageError(
            "--merge combines existing tables; --devices, --device-ips and --server-id do not "
            "apply");
      }
      return cmd;
    }
    if (devices.empty()) {
      const DiscoveredDevices found = discover_devices(env);
      if (found.kind != DeviceKind::kAscend || found.physical_ids.empty()) {
        throw UsageError(fmt::format("{}; give the devices with --devices, e.g. --devices 0-7",
                                     found.description));
      }
      cmd.devices = found.physical_ids;
    } else if (auto classic = parse_half_open_range(devices, "--devices")) {
      cmd.devices = *classic;
    } else {
      cmd.devices = parse_device_list(devices, "--devices");
    }
    if (!device_ips.empty()) {
      for (std::string_view ip : split(device_ips, ',')) cmd.device_ips.emplace_back(ip);
      if (cmd.device_ips.size() != cmd.devices.size()) {
        throw UsageError(fmt::format(
            "--device-ips lists {} addresses for {} devices; give one per device, in the "
            "order of --devices",
            cmd.device_ips.size(), cmd.devices.size()));
      }
      for (const std::string& ip : cmd.device_ips) {
        boost::system::error_code ec;
        boost::asio::ip::make_address(ip, ec);
        if (ec) throw UsageError(fmt::format("--device-ips: '{}' is not an IP address", ip));
      }
    }
    if (cmd.hccn_conf.empty())
      cmd.hccn_conf = lookup(env, "NPU_RUN_HCCN_CONF").value_or(kDefaultHccnConf);
    if (cmd.version == "1.2") {
      if (super_device_ids.empty()) {
        throw UsageError(
            "--version 1.2 needs --super-device-ids: each device's SDID, from `npu-smi info -t "
            "spod-info "
            "-i <id> -c <chip>`");
      }
      for (std::string_view id : split(super_device_ids, ',')) {
        const auto value = parse_integer(id, 0, 1'000'000'000);
        if (!value) throw UsageError(fmt::format("--super-device-ids: '{}' is not a number", id));
        cmd.super_device_ids.push_back(static_cast<int>(*value));
      }
      if (cmd.super_device_ids.size() != cmd.devices.size()) {
        throw UsageError(
            fmt::format("--super-device-ids lists {} ids for {} devices; give one per device",
                        cmd.super_device_ids.size(), cmd.devices.size()));
      }
    } else if (!super_device_ids.empty()) {
      throw UsageError("--super-device-ids belongs to --version 1.2");
    }
    return cmd;
  } catch (const UsageError& e) {
    return usage_error(std::string(e.what()) + " (npu_run rank-table)");
  }
}

// The raw values of `npu_run doctor`, as CLI11 fills them.
struct DoctorRaw {
  DoctorCommand cmd;
  std::string nnodes = "1";
};

std::unique_ptr<CLI::App> doctor_app(DoctorRaw& raw) {
  auto app = std::make_unique<CLI::App>(
      "npu_run doctor [--nnodes N] [OPTIONS]\n\nCheck this host for large or Ascend jobs: kernel "
      "queues, "
      "HCCL's reserved ports, open files, the master port, devices and hccn.conf. Each check "
      "prints ok, warn "
      "or fail with the command that fixes it; the exit status is 1 when a check fails.",
      "npu_run doctor");
  DoctorCommand& cmd = raw.cmd;
  app->add_option("--nnodes", raw.nnodes,
                  "Nodes of the planned job, N or MIN:MAX: scales the recommendations");
  app->add_option("--master-addr,--master_addr", cmd.settings.master_addr,
                  "Rendezvous host to check the port on");
  app->add_option("--master-port,--master_port", cmd.settings.master_port,
                  "Rendezvous port that must be free");
  app->add_option("--hccn-conf,--hccn_conf", cmd.settings.hccn_conf,
                  "Device addresses file (default /etc/hccn.conf)")
      ->type_name("FILE");
  app->add_option("--proc-root", cmd.settings.proc_root,
                  "Read kernel settings under this /proc (tests)")
      ->type_name("DIR");
  app->add_flag("--json", cmd.json, "Print the checks as JSON");
  return app;
}

std::variant<DoctorCommand, EarlyExit> parse_doctor_command(const std::vector<std::string>& args,
                                                            const EnvMap& env) {
  DoctorRaw raw;
  const auto app_owner = doctor_app(raw);
  CLI::App& app = *app_owner;
  DoctorCommand& cmd = raw.cmd;
  std::string& nnodes = raw.nnodes;
  cmd.settings.env = env;
  cmd.settings.proc_root = lookup(env, "NPU_RUN_PROC_ROOT").value_or("/proc");
  cmd.settings.hccn_conf = lookup(env, "NPU_RUN_HCCN_CONF").value_or(kDefaultHccnConf);
  try {
    std::vector<std::string> reversed(args.rbegin(), args.rend());
    app.parse(reversed);
  } catch (const CLI::CallForHelp&) {
    return EarlyExit{0, app.help(), false};
  } catch (const CLI::ParseError& e) {
    return usage_error(std::string(e.what()) + " (npu_run doctor)");
  }
  try {
    LaunchConfig shape;
    parse_nnodes(nnodes, "--nnodes", shape);
    cmd.settings.nnodes = shape.max_nodes;
    // Inside a Slurm step or under mpirun, check what the launch there will use: the job's
    // node count and its derived master address and port. (Any number of tasks per node may
    // run the doctor, so none is refused here.)
    const ClusterDefaults cluster = detect_cluster(env, ClusterKind::kAuto, 1024);
    if (app.get_option("--nnodes")->count() == 0 && cluster.nnodes)
      cmd.settings.nnodes = *cluster.nnodes;
    if (app.get_option("--master-addr")->count() == 0 && cluster.master_addr)
      cmd.settings.master_addr = *cluster.master_addr;
    if (app.get_option("--master-port")->count() == 0 && cluster.master_port)
      cmd.settings.master_port = *cluster.master_port;
    if (cluster.node_rank && *cluster.node_rank != 0)
      cmd.settings.other_node_rank = cluster.node_rank;
    if (cmd.settings.master_port < 1 || cmd.settings.master_port > 65535) {
      throw UsageError(fmt::format("--master-port {}: a port must be between 1 and 65535",
                                   cmd.settings.master_port));
    }
    return cmd;
  } catch (const UsageError& e) {
    return usage_error(std::string(e.what()) + " (npu_run doctor)");
  }
}

namespace {

CommandCompletion completion_of(std::string name, const CLI::App& app) {
  CommandCompletion command{std::move(name), {}};
  for (const CLI::Option* opt : app.get_options()) {
    OptionCompletion option;
    for (const auto& s : opt->get_snames()) option.names.push_back("-" + s);
    for (const auto& l : opt->get_lnames()) option.names.push_back("--" + l);
    option.takes_value = opt->get_expected_max() > 0;  // 0 for a flag
    option.type_name = opt->get_type_name();
    command.options.push_back(std::move(option));
  }
  return command;
}

}  // namespace

std::vector<CommandCompletion> command_completions() {
  CommandLine launch;
  ServerRaw server;
  RankTableRaw rank_table;
  DoctorRaw doctor;
  return {completion_of("", launch.app()), completion_of("rdzv-server", *server_app(server)),
          completion_of("rank-table", *rank_table_app(rank_table)),
          completion_of("doctor", *doctor_app(doctor))};
}

}  // namespace npu_run
