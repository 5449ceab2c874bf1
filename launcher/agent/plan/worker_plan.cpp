#include "agent/plan/worker_plan.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "agent/plan/framework_env.hpp"
#include "agent/plan/worker_env.hpp"
#include "config/line_prefix.hpp"
#include "net/host_address.hpp"

namespace npu_run {
namespace {

StreamRoute route_stream(const LaunchConfig& cfg, const AttemptLayout& layout, int local_rank,
                         bool is_stdout) {
  auto selects = [&](const RankStreamMap& map) {
    const StdStreams s = map.for_rank(local_rank);
    return is_stdout ? has_stdout(s) : has_stderr(s);
  };
  const bool redirected = selects(cfg.output.redirects);
  const bool teed = selects(cfg.output.tee);
  const bool console_allowed =
      !cfg.output.local_ranks_filter || cfg.output.local_ranks_filter->count(local_rank) > 0;
  // With a log directory, output filtered off the console still reaches the rank's files: that
  // is the Ascend habit "rank 0 on the console, every rank in files" with one flag.
  const bool filtered_to_file = !console_allowed && layout.log_files;

  StreamRoute route;
  // Tee wins over redirect for a stream both name, as in torchrun (-r 3 -t 3 tees).
  route.to_console = console_allowed && (!redirected || teed);
  if ((redirected || teed || filtered_to_file) && layout.log_files) {
    route.file = fmt::format("{}/{}", attempt_rank_dir(layout, local_rank),
                             is_stdout ? "stdout.log" : "stderr.log");
  }
  const bool explicit_prefix = cfg.output.prefix_template.has_value();
  const auto& filters = is_stdout ? cfg.output.stdout_filters : cfg.output.stderr_filters;
  if (route.to_console && !filters.empty() && layout.log_files) {
    // torchrun copies the teed lines; lines that reach the console plainly are copied too, and
    // that console keeps them as it would have shown them.
    route.filters = filters;
    route.filtered_file = fmt::format("{}/attempt_{}/filtered_{}.log", layout.run_dir,
                                      layout.attempt, is_stdout ? "stdout" : "stderr");
  }
  if (route.to_console && (!route.file.empty() || explicit_prefix)) {
    route.sink = StreamSink::kRelay;
  } else if (route.to_console && !route.filters.empty()) {
    route.sink = StreamSink::kRelay;
    route.prefixed = false;
  } else if (route.to_console) {
    route.sink = StreamSink::kInherit;
  } else if (!route.file.empty()) {
    route.sink = StreamSink::kFile;
  } else {
    route.sink = StreamSink::kDiscard;
  }
  if (!is_stdout) {
    // A failure's traceback and a hang's stack dump are read back from stderr (the restart
    // classification, the summary's top frames, the odd one out): a stream the agent would not
    // see goes through a relay that keeps its bytes as they are (unprefixed) or, filtered off
    // the console without a file, keeps only its tail.
    route.keep_tail = true;
    if (route.sink == StreamSink::kInherit) {
      route.sink = StreamSink::kRelay;
      route.prefixed = false;
    } else if (route.sink == StreamSink::kDiscard) {
      route.sink = StreamSink::kRelay;
    }
  }
  return route;
}

// `npu_run msrun`'s layout (config/launch_config.hpp MsrunLogs): msrun points both streams of
// a process at one file; the console shows what --tail_worker_log names (msrun tails the files).
StreamRoute msrun_route(const std::string& file, bool to_console, int attempt, bool is_stdout) {
  StreamRoute route;
  route.file = file;
  route.shared_file = true;
  route.keep_file = attempt > 0;  // msrun has no restarts; ours add to the first attempt's file
  route.to_console = to_console;
  route.sink = to_console ? StreamSink::kRelay : StreamSink::kFile;
  route.keep_tail = !is_stdout;  // the failure's traceback, read back from the file
  return route;
}

std::string msrun_file(const MsrunLogs& logs, const std::string& name) {
  return logs.dir.empty() ? name : fmt::format("{}/{}", logs.dir, name);
}

// The rank a process was given (RANK_ID): its global rank, or the one a dry run simulates.
int msrun_rank(const LaunchConfig& cfg, const WorkerSpec& spec) {
  const auto& sim = cfg.worker.ms_simulation;
  if (!sim) return spec.global_rank;
  return sim->rank_id >= 0 ? sim->rank_id : sim->first_rank + spec.local_rank;
}

void route_to_msrun_files(const LaunchConfig& cfg, int attempt, WorkerSpec& spec) {
  const MsrunLogs& logs = *cfg.output.msrun_logs;
  const int rank = msrun_rank(cfg, spec);
  const std::string file = msrun_file(logs, fmt::format("{}_{}.log", logs.stem, rank));
  const bool console = logs.console && (!logs.console_ranks || logs.console_ranks->count(rank) > 0);
  spec.out = msrun_route(file, console, attempt, true);
  spec.err = msrun_route(file, console, attempt, false);
}

}  // namespace

std::string attempt_rank_dir(const AttemptLayout& layout, int local_rank) {
  return fmt::format("{}/attempt_{}/{}", layout.run_dir, layout.attempt, local_rank);
}

std::vector<std::string> substitute_local_rank(const std::vector<std::string>& args,
                                               int local_rank) {
  static const std::string kMacro = "${local_rank}";
  std::vector<std::string> out = args;
  for (std::string& arg : out) {
    for (auto pos = arg.find(kMacro); pos != std::string::npos; pos = arg.find(kMacro, pos)) {
      const std::string value = std::to_string(local_rank);
      arg.replace(pos, kMacro.size(), value);
      pos += value.size();
    }
  }
  return out;
}

std::vector<WorkerSpec> make_worker_specs(const LaunchConfig& cfg, const Assignment& assignment,
                                          const AttemptLayout& layout, const EnvMap& agent_env) {
  std::vector<WorkerSpec> specs;
  specs.reserve(cfg.shape.nproc_per_node);
  const std::string prefix_template = cfg.output.prefix_template.value_or(kDefaultPrefixTemplate);
  for (int local_rank = 0; local_rank < cfg.shape.nproc_per_node; ++local_rank) {
    WorkerSpec spec;
    spec.local_rank = local_rank;
    spec.global_rank = assignment.rank_offset + local_rank;
    spec.device_id = cfg.shape.devices.at(local_rank);
    spec.program = cfg.worker.program;
    if (cfg.worker.mode != WorkerMode::kExecutable)
      spec.argv.emplace_back("-u");  // unbuffered, as torchrun
    if (cfg.worker.mode == WorkerMode::kPythonModule) spec.argv.emplace_back("-m");
    if (cfg.worker.mode != WorkerMode::kExecutable) spec.argv.push_back(cfg.worker.entrypoint);
    for (auto& arg : substitute_local_rank(cfg.worker.args, local_rank))
      spec.argv.push_back(std::move(arg));

    if (!layout.run_dir.empty()) {
      spec.log_dir = attempt_rank_dir(layout, local_rank);
      spec.error_file = spec.log_dir + "/error.json";
    }
    spec.contract_env = worker_contract_env(
        cfg, assignment, WorkerSlot{local_rank, layout.attempt, spec.error_file}, agent_env);
    spec.env = merged_worker_env(cfg, agent_env, spec.contract_env);
    if (!cfg.worker.numa.empty()) {
      const NumaPlacement& place = cfg.worker.numa.at(static_cast<size_t>(local_rank));
      spec.cpus = place.cpus;
      spec.numa_node = place.node;
    }
    spec.reads_stdin = local_rank == 0;  // pdb and breakpoint() in rank 0, as under torchrun
    spec.out = route_stream(cfg, layout, local_rank, true);
    spec.err = route_stream(cfg, layout, local_rank, false);
    if (cfg.output.msrun_logs) route_to_msrun_files(cfg, layout.attempt, spec);
    spec.console_prefix = expand_prefix_template(
        prefix_template, PrefixValues{spec.global_rank, local_rank, assignment.node_rank,
                                      cfg.worker.role, assignment.host});
    specs.push_back(std::move(spec));
  }
  return specs;
}

std::optional<WorkerSpec> make_scheduler_spec(const LaunchConfig& cfg, const Assignment& assignment,
                                              const AttemptLayout& layout,
                                              const EnvMap& agent_env) {
  if (!runs_mindspore_scheduler(cfg, assignment)) return std::nullopt;
  // The first worker's command (msrun runs the same one), then what makes it the scheduler.
  WorkerSpec spec = make_worker_specs(cfg, assignment, layout, agent_env).front();
  spec.local_rank = -1;
  spec.global_rank = -1;
  spec.device_id = -1;
  spec.contract_env = scheduler_contract_env(cfg, assignment, layout.attempt);
  spec.env = merged_worker_env(cfg, agent_env, spec.contract_env);
  spec.cpus.clear();
  spec.numa_node = -1;
  spec.reads_stdin = false;
  spec.error_file.clear();
  spec.log_dir = layout.run_dir.empty()
                     ? ""
                     : fmt::format("{}/attempt_{}/scheduler", layout.run_dir, layout.attempt);
  for (StreamRoute* route : {&spec.out, &spec.err}) {
    // On the console, prefixed; in its own files wherever the workers' go to files.
    const bool to_file = !route->file.empty() || layout.log_files;
    const char* name = route == &spec.out ? "stdout.log" : "stderr.log";
    route->to_console = true;
    route->sink = StreamSink::kRelay;
    route->prefixed = true;
    route->filters.clear();
    route->filtered_file.clear();
    route->file = to_file && !spec.log_dir.empty() ? spec.log_dir + "/" + name : "";
  }
  spec.console_prefix = "[scheduler] ";
  if (const auto& logs = cfg.output.msrun_logs) {
    // msrun never shows the scheduler's output: scheduler.log holds it.
    const std::string file = msrun_file(*logs, "scheduler.log");
    spec.out = msrun_route(file, false, layout.attempt, true);
    spec.err = msrun_route(file, false, layout.attempt, false);
  }
  return spec;
}

void add_progress_env(std::vector<WorkerSpec>& specs, const std::string& agent_directory,
                      const LaunchConfig& cfg, const EnvMap& agent_env) {
  for (WorkerSpec& spec : specs) {
    const auto set = [&spec](const std::string& name, const std::string& value) {
      spec.env[name] = value;
      spec.contract_env[name] = value;
    };
    if (!agent_directory.empty())
      set("NPU_RUN_PROGRESS", fmt::format("{}/{}", agent_directory, spec.local_rank));
    if (cfg.supervision.hang.any() && agent_env.count("PYTHONFAULTHANDLER") == 0)
      set("PYTHONFAULTHANDLER", "1");
  }
}

std::string socket_interface_of(const std::string& address) {
  if (address.empty()) return "";
  std::string name = net::interface_of_address(address);
  if (name.empty()) {
    spdlog::warn(
        "no interface of this host holds {}, the address peers use for it: the workers' "
        "*_SOCKET_IFNAME are left unset",
        address);
  }
  return name;
}

}  // namespace npu_run
