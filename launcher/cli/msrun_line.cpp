#include "cli/msrun_line.hpp"

#include <fmt/format.h>

#include <map>
#include <set>

#include "basics/text.hpp"
#include "basics/usage_error.hpp"

namespace npu_run {

namespace {

// msrun's options and their defaults (MindSpore 2.3-2.6, mindspore/parallel/cluster/run.py).
std::map<std::string, std::string> msrun_defaults() {
  return {{"worker_num", "8"},     {"local_worker_num", "8"},   {"master_addr", "127.0.0.1"},
          {"master_port", "8118"}, {"node_rank", "-1"},         {"log_dir", ""},
          {"join", "False"},       {"cluster_time_out", "600"}, {"bind_core", "False"},
          {"sim_level", "-1"},     {"sim_rank_id", "-1"},       {"rank_table_file", ""},
          {"worker_log_name", ""}, {"tail_worker_log", "-1"}};
}

bool msrun_bool(const std::string& name, const std::string& value) {
  if (value == "True" || value == "true" || value == "1") return true;
  if (value == "False" || value == "false" || value == "0") return false;
  throw UsageError(fmt::format("msrun --{} '{}': expected True or False", name, value));
}

int msrun_int(const std::string& name, const std::string& value, long long min, long long max) {
  const auto n = parse_integer(value, min, max);
  if (!n)
    throw UsageError(fmt::format("msrun --{} '{}': expected a whole number from {} to {}", name,
                                 value, min, max));
  return static_cast<int>(*n);
}

struct MsrunSplit {
  std::map<std::string, std::string> msrun;
  std::vector<std::string> npu_run;        // npu_run's own options, as typed
  std::vector<std::string> npu_run_names;  // their names
  std::vector<std::string> script;         // the script and its arguments
  std::set<std::string> typed;             // msrun's options the line gave
};

MsrunSplit split_line(const std::vector<std::string>& args,
                 const std::function<bool(const std::string&)>& takes_value) {
  MsrunSplit s{msrun_defaults(), {}, {}, {}, {}};
  size_t i = 0;
  for (; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--") {
      ++i;
      break;
    }
    if (a.size() < 2 || a[0] != '-') break;  // the script
    const size_t eq = a.find('=');
    const size_t start = a.find_first_not_of('-');
    const std::string name = a.substr(start, eq == std::string::npos ? eq : eq - start);
    if (a.rfind("--", 0) == 0 && s.msrun.count(name) > 0) {
      s.typed.insert(name);
      if (eq != std::string::npos) {
        s.msrun[name] = a.substr(eq + 1);
      } else if (i + 1 < args.size()) {
        s.msrun[name] = args[++i];
      } else {
        throw UsageError(fmt::format("msrun --{} needs a value", name));
      }
      continue;
    }
    s.npu_run.push_back(a);
    s.npu_run_names.push_back(a.substr(0, eq));
    if (eq == std::string::npos && takes_value(a.substr(0, eq)) && i + 1 < args.size())
      s.npu_run.push_back(args[++i]);
  }
  s.script.assign(args.begin() + static_cast<std::ptrdiff_t>(i), args.end());
  return s;
}

// The job's shape as msrun's counts give it, each mistake named.
struct Counts {
  int workers = 8;
  int local = 8;
  int nodes = 1;
  int node_rank = -1;
};

Counts read_counts(std::map<std::string, std::string>& o) {
  Counts c;
  c.workers = msrun_int("worker_num", o["worker_num"], 1, 1'000'000);
  c.local = msrun_int("local_worker_num", o["local_worker_num"], 1, 1024);
  if (c.local > c.workers) {
    throw UsageError(fmt::format(
        "msrun --local_worker_num {} is more than --worker_num {}: a node cannot run more "
        "workers than the job has; lower --local_worker_num",
        c.local, c.workers));
  }
  if (c.workers % c.local != 0) {
    throw UsageError(fmt::format(
        "msrun --worker_num {} is not a multiple of --local_worker_num {}: npu_run runs the same "
        "number of workers on every node",
        c.workers, c.local));
  }
  c.nodes = c.workers / c.local;
  c.node_rank = msrun_int("node_rank", o["node_rank"], -1, 1'000'000);
  if (c.node_rank >= c.nodes) {
    throw UsageError(
        fmt::format("msrun --node_rank {}: node ranks run from 0 to {} with --worker_num {} and "
                    "--local_worker_num {} (or -1: the rendezvous assigns them)",
                    c.node_rank, c.nodes - 1, c.workers, c.local));
  }
  return c;
}

// "-1": every worker's output on the console; else the ranks listed ("0,1").
std::optional<std::set<int>> read_tail_ranks(const std::string& value, int workers) {
  if (value == "-1") return std::nullopt;
  std::set<int> ranks;
  for (const std::string_view word : split(value, ',')) {
    const auto rank = parse_integer(trim(word), 0, 1'000'000);
    if (!rank) {
      throw UsageError(fmt::format(
          "msrun --tail_worker_log '{}': give -1 (every worker) or ranks separated by commas, "
          "like 0,1",
          value));
    }
    if (*rank >= workers) {
      throw UsageError(
          fmt::format("msrun --tail_worker_log '{}': rank {} is not in the job (ranks 0 to {} with "
                      "--worker_num {})",
                      value, *rank, workers - 1, workers));
    }
    ranks.insert(static_cast<int>(*rank));
  }
  return ranks;
}

// msrun's dry run (process_entity/_api.py): --sim_level, or MS_SIMULATION_LEVEL already set;
// --sim_rank_id (else RANK_ID from the environment) makes it one process; more than 128 local
// processes become one, rank 0, as msrun does to spare the machine.
std::optional<MindSporeSimulation> read_simulation(std::map<std::string, std::string>& o,
                                                   const EnvMap& env, Counts& c) {
  int level = msrun_int("sim_level", o["sim_level"], -1, 1'000);
  int rank_id = msrun_int("sim_rank_id", o["sim_rank_id"], -1, c.workers - 1);
  MindSporeSimulation sim;
  sim.worker_num = c.workers;
  if (level == -1) {
    const auto inherited = lookup(env, "MS_SIMULATION_LEVEL");
    if (!inherited || inherited->empty()) return std::nullopt;
    level = msrun_int("sim_level (from MS_SIMULATION_LEVEL)", *inherited, 0, 1'000);
    if (const auto size = lookup(env, "RANK_SIZE"))
      sim.worker_num = msrun_int("worker_num (from RANK_SIZE)", *size, 1, 1'000'000);
  }
  if (rank_id == -1) {
    if (const auto inherited = lookup(env, "RANK_ID"); inherited && !inherited->empty())
      rank_id = msrun_int("sim_rank_id (from RANK_ID)", *inherited, -1, sim.worker_num - 1);
  }
  if (rank_id == -1 && c.local > 128) rank_id = 0;
  sim.level = level;
  sim.rank_id = rank_id;
  sim.first_rank = c.node_rank >= 0 ? c.node_rank * c.local : 0;
  if (rank_id >= 0) c.local = 1;
  return sim;
}

std::vector<std::string> shape_args(std::map<std::string, std::string>& o, const Counts& c,
                                    bool simulated, const std::set<std::string>& typed) {
  // A dry run builds no cluster: one node, this one.
  const int nodes = simulated ? 1 : c.nodes;
  std::vector<std::string> l = {
      "--framework",
      "mindspore",
      "--nproc-per-node",
      std::to_string(c.local),
      "--nnodes",
      std::to_string(nodes),
      "--master-addr",
      simulated ? std::string("127.0.0.1") : o["master_addr"],
      "--rdzv-timeout",
      std::to_string(msrun_int("cluster_time_out", o["cluster_time_out"], 1, 604'800))};
  // Several nodes meet at the port; one node needs none, so msrun's default 8118 is left to
  // npu_run's choice of a free port there: two single-node jobs on one host never collide.
  const int port = msrun_int("master_port", o["master_port"], 1, 65535);
  if (nodes > 1 || typed.count("master_port") > 0)
    l.insert(l.end(), {"--master-port", std::to_string(port)});
  if (c.node_rank >= 0 && !simulated)
    l.insert(l.end(), {"--node-rank", std::to_string(c.node_rank)});
  if (!o["rank_table_file"].empty()) l.insert(l.end(), {"--rank-table", o["rank_table_file"]});
  const std::string& bind = o["bind_core"];
  if (!bind.empty() && bind.front() == '{') {
    throw UsageError(fmt::format(
        "msrun --bind_core '{}': npu_run splits the CPUs near each device itself; give True "
        "(or False)",
        bind));
  }
  return l;
}

}  // namespace

MsrunLine read_msrun_line(const std::vector<std::string>& args,
                          const std::function<bool(const std::string&)>& takes_value,
                          const EnvMap& env) {
  MsrunSplit s = split_line(args, takes_value);
  auto& o = s.msrun;
  if (s.script.empty())
    throw UsageError(
        "npu_run msrun: no training script given; usage: npu_run msrun [OPTIONS] SCRIPT [ARGS...]");
  Counts counts = read_counts(o);
  MsrunLine line;
  line.join = msrun_bool("join", o["join"]);
  line.log_dir = o["log_dir"];
  line.worker_log_name = o["worker_log_name"];
  line.tail_ranks = read_tail_ranks(o["tail_worker_log"], counts.workers);
  line.simulation = read_simulation(o, env, counts);
  line.launch_args = shape_args(o, counts, line.simulation.has_value(), s.typed);
  line.bind_core = msrun_bool("bind_core", o["bind_core"]);
  line.npu_run_options = s.npu_run_names;
  auto& l = line.launch_args;
  l.insert(l.end(), s.npu_run.begin(), s.npu_run.end());
  // msrun prepends python unless the command is python, python3 or pytest itself.
  const std::string& first = s.script.front();
  const std::string base = first.substr(first.rfind('/') + 1);
  if (base == "python" || base == "python3" || base == "pytest") l.emplace_back("--no-python");
  l.insert(l.end(), s.script.begin(), s.script.end());
  return line;
}

}  // namespace npu_run
