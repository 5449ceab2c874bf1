#include "cluster/cluster_env.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <functional>

#include "basics/enum_table.hpp"
#include "basics/text.hpp"
#include "basics/usage_error.hpp"
#include "cluster/hostlist.hpp"

namespace npu_run {

namespace {

// An integer variable, named in the error when it is malformed.
std::optional<int> int_var(const EnvMap& env, const std::string& name, int min, int max) {
  const auto text = lookup(env, name);
  if (!text) return std::nullopt;
  const auto value = parse_integer(*text, min, max);
  if (!value)
    throw UsageError(fmt::format("{}='{}' is not a number from {} to {}", name, *text, min, max));
  return static_cast<int>(*value);
}

std::optional<std::string> first_of(const EnvMap& env, std::initializer_list<const char*> names,
                                    std::string& which) {
  for (const char* name : names) {
    if (auto v = lookup(env, name); v && !v->empty()) {
      which = name;
      return v;
    }
  }
  return std::nullopt;
}

// Refuses more agents on one node than --agents-per-node allows: they would fight over the
// node's devices. Every agent decides the same way, so the whole step is refused.
void check_agents_per_node(int on_node, int allowed, const std::string& launcher_fix) {
  if (on_node <= allowed) return;
  throw UsageError(fmt::format(
      "{} agents were started on one node, but npu_run is one agent per node: it starts that "
      "node's "
      "workers itself. {} (or pass --agents-per-node {} if agents should share nodes on purpose)",
      on_node, launcher_fix, on_node));
}

// The batch script itself, outside srun: only this one agent exists.
ClusterDefaults slurm_batch_script(ClusterDefaults d, const EnvMap& env, const std::string& job,
                                   bool forced) {
  d.facts.description = fmt::format("Slurm job {} (batch script, not an srun step)", job);
  const int nnodes = int_var(env, "SLURM_NNODES", 1, 1'000'000).value_or(1);
  if (nnodes > 1 || forced) {
    d.facts.warnings.push_back(
        fmt::format("npu_run runs in the batch script of Slurm job {}, outside srun: only this "
                    "node takes part. To use all "
                    "{} nodes, start it with `srun --ntasks-per-node=1 npu_run ...`",
                    job, nnodes));
  }
  return d;
}

// The node count and this agent's node rank: the step's nodes (counted from the variable
// nodes_from), or with several agents per node, the step's tasks.
void set_slurm_nodes(ClusterDefaults& d, const EnvMap& env, int nodes,
                     const std::string& nodes_from, int agents_per_node) {
  if (agents_per_node > 1) {
    // Several agents per node: each agent is a node of the rendezvous.
    d.nnodes = int_var(env, "SLURM_STEP_NUM_TASKS", 1, 1'000'000).value_or(nodes);
    d.node_rank = int_var(env, "SLURM_PROCID", 0, 1'000'000);
    d.agent_index = int_var(env, "SLURM_LOCALID", 0, 1'000'000).value_or(0);
    d.facts.detected.push_back(
        fmt::format("nnodes = {} (SLURM_STEP_NUM_TASKS: agents, --agents-per-node {})", *d.nnodes,
                    agents_per_node));
    if (d.node_rank)
      d.facts.detected.push_back(fmt::format("node rank = {} (SLURM_PROCID)", *d.node_rank));
    return;
  }
  d.nnodes = nodes;
  d.node_rank = int_var(env, "SLURM_NODEID", 0, 1'000'000);
  d.facts.detected.push_back(fmt::format("nnodes = {} ({})", nodes, nodes_from));
  if (d.node_rank)
    d.facts.detected.push_back(fmt::format("node rank = {} (SLURM_NODEID)", *d.node_rank));
}

// The run id and the master port a scheduler's job implies: every node of the job derives the
// same, and the log says from what.
void name_job(ClusterDefaults& d, std::string run_id, const std::string& run_id_origin,
              const std::string& job, const std::string& port_origin) {
  d.run_id = std::move(run_id);
  d.master_port = port_for_job(job);
  d.facts.detected.push_back(fmt::format("run id = {}{}", *d.run_id, run_id_origin));
  d.facts.detected.push_back(fmt::format("master port = {} ({})", *d.master_port, port_origin));
}

ClusterDefaults detect_slurm(const EnvMap& env, int agents_per_node, bool forced) {
  ClusterDefaults d;
  d.kind = ClusterKind::kSlurm;
  const auto job = lookup(env, "SLURM_JOB_ID");
  const auto step = lookup(env, "SLURM_STEP_ID");
  if (!job)
    throw UsageError(
        "--cluster slurm: SLURM_JOB_ID is not set; run npu_run inside a Slurm job (srun)");
  if (!step) return slurm_batch_script(std::move(d), env, *job, forced);
  d.facts.description = fmt::format("Slurm job {} step {}", *job, *step);
  std::string nodes_var;
  const auto nodelist =
      first_of(env, {"SLURM_STEP_NODELIST", "SLURM_JOB_NODELIST", "SLURM_NODELIST"}, nodes_var);
  std::string count_var;
  const auto node_count =
      first_of(env, {"SLURM_STEP_NUM_NODES", "SLURM_NNODES", "SLURM_JOB_NUM_NODES"}, count_var);
  const int nodes = node_count ? int_var(env, count_var, 1, 1'000'000).value()
                               : static_cast<int>(nodelist ? count_hosts(*nodelist) : 1);
  std::string tasks_var;
  const auto tasks =
      first_of(env, {"SLURM_STEP_TASKS_PER_NODE", "SLURM_TASKS_PER_NODE"}, tasks_var);
  const std::vector<int> per_node =
      tasks ? parse_tasks_per_node(*tasks, tasks_var) : std::vector<int>{1};
  const int most = *std::max_element(per_node.begin(), per_node.end());
  check_agents_per_node(
      most, agents_per_node,
      fmt::format("srun started up to {} tasks per node ({}={}): use `srun --ntasks-per-node=1`",
                  most, tasks_var, tasks.value_or("?")));
  set_slurm_nodes(d, env, nodes, node_count ? count_var : nodes_var, agents_per_node);
  if (nodelist) {
    d.master_addr = first_host(*nodelist);
    d.facts.detected.push_back(
        fmt::format("master = {} (first host of {}={})", *d.master_addr, nodes_var, *nodelist));
  }
  name_job(
      d, fmt::format("{}.{}", *job, *step), " (job.step)", *job,
      fmt::format("from job id {}: {} + id mod {}", *job, kDerivedPortBase, kDerivedPortCount));
  return d;
}

ClusterDefaults detect_mpi(const EnvMap& env, int agents_per_node) {
  ClusterDefaults d;
  d.kind = ClusterKind::kMpi;
  const auto size = int_var(env, "OMPI_COMM_WORLD_SIZE", 1, 1'000'000);
  const auto rank = int_var(env, "OMPI_COMM_WORLD_RANK", 0, 1'000'000);
  if (!size || !rank) {
    throw UsageError(
        "--cluster mpi: OMPI_COMM_WORLD_SIZE/OMPI_COMM_WORLD_RANK are not set; start npu_run with "
        "mpirun");
  }
  const int local_size = int_var(env, "OMPI_COMM_WORLD_LOCAL_SIZE", 1, 1'000'000).value_or(1);
  check_agents_per_node(
      local_size, agents_per_node,
      fmt::format("mpirun started {} processes on this node (OMPI_COMM_WORLD_LOCAL_SIZE): use "
                  "`mpirun --map-by ppr:1:node`",
                  local_size));
  const auto job = lookup(env, "OMPI_MCA_ess_base_jobid").value_or("0");
  d.facts.description = fmt::format("Open MPI job {} ({} processes)", job, *size);
  d.nnodes = size;
  d.node_rank = rank;
  d.agent_index = int_var(env, "OMPI_COMM_WORLD_LOCAL_RANK", 0, 1'000'000).value_or(0);
  d.facts.detected.push_back(fmt::format("nnodes = {} (OMPI_COMM_WORLD_SIZE)", *size));
  d.facts.detected.push_back(fmt::format("node rank = {} (OMPI_COMM_WORLD_RANK)", *rank));
  // mpirun's own address ("...;tcp://10.0.0.1:port;...") is where it was started: usually the
  // first node, which hosts rank 0. --master-addr overrides it.
  if (const auto uri = lookup(env, "OMPI_MCA_orte_hnp_uri")) {
    const auto tcp = uri->find("tcp://");
    if (tcp != std::string::npos) {
      const auto start = tcp + 6;
      const auto end = uri->find_first_of(":,;", start);
      d.master_addr = uri->substr(start, end - start);
      d.facts.detected.push_back(
          fmt::format("master = {} (mpirun's address in OMPI_MCA_orte_hnp_uri)", *d.master_addr));
    }
  }
  name_job(d, fmt::format("mpi-{}", job), "", job, fmt::format("from job id {}", job));
  return d;
}

// Where a pod's job meets, from the variables its operator sets, each noted as found.
void take_master(const EnvMap& env, const char* addr_var, const char* port_var,
                 ClusterDefaults& d) {
  if (auto addr = lookup(env, addr_var)) {
    d.master_addr = addr;
    d.facts.detected.push_back(fmt::format("master = {} ({})", *addr, addr_var));
  }
  if (auto port = int_var(env, port_var, 1, 65535)) {
    d.master_port = port;
    d.facts.detected.push_back(fmt::format("master port = {} ({})", *port, port_var));
  }
}

ClusterDefaults detect_k8s(const EnvMap& env, bool forced) {
  ClusterDefaults d;
  d.kind = ClusterKind::kK8s;
  const auto world = int_var(env, "WORLD_SIZE", 1, 1'000'000);
  const auto rank = int_var(env, "RANK", 0, 1'000'000);
  if (forced && (!world || !rank)) {
    throw UsageError(
        "--cluster k8s: WORLD_SIZE and RANK are not set; a PyTorchJob gives them to every pod");
  }
  d.facts.description = "Kubernetes pod (PyTorchJob)";
  // Per pod: WORLD_SIZE pods, this is pod RANK, MASTER_ADDR:MASTER_PORT is the master pod.
  if (world) {
    d.nnodes = world;
    d.facts.detected.push_back(fmt::format("nnodes = {} (WORLD_SIZE: pods)", *world));
  }
  if (rank) {
    d.node_rank = rank;
    d.facts.detected.push_back(fmt::format("node rank = {} (RANK)", *rank));
  }
  take_master(env, "MASTER_ADDR", "MASTER_PORT", d);
  return d;
}

// A MindSpore pod of MindCluster's operator (Ascend's Kubernetes job manager), which gives
// every pod msrun's view of the job: MS_SCHED_HOST:MS_SCHED_PORT (where the job meets),
// MS_WORKER_NUM workers in all, MS_LOCAL_WORKER in this pod, and MS_NODE_RANK. npu_run's
// rendezvous meets there; its own scheduler gets a port node 0's agent holds.
ClusterDefaults detect_mindcluster(const EnvMap& env) {
  ClusterDefaults d;
  d.kind = ClusterKind::kK8s;
  d.facts.description = "Kubernetes pod of a MindCluster MindSpore job";
  const auto workers = int_var(env, "MS_WORKER_NUM", 1, 1'000'000);
  const auto local = int_var(env, "MS_LOCAL_WORKER", 1, 1'000'000);
  if (workers && local) {
    if (*workers % *local != 0) {
      throw UsageError(fmt::format(
          "MS_WORKER_NUM={} is not a multiple of MS_LOCAL_WORKER={}: the pods of this MindSpore "
          "job cannot hold the same number of workers; fix the job's worker counts",
          *workers, *local));
    }
    d.nnodes = *workers / *local;
    d.facts.detected.push_back(
        fmt::format("nnodes = {} (MS_WORKER_NUM / MS_LOCAL_WORKER)", *d.nnodes));
  }
  if (const auto rank = int_var(env, "MS_NODE_RANK", 0, 1'000'000)) {
    d.node_rank = rank;
    d.facts.detected.push_back(fmt::format("node rank = {} (MS_NODE_RANK)", *rank));
  }
  take_master(env, "MS_SCHED_HOST", "MS_SCHED_PORT", d);
  return d;
}

}  // namespace

bool mindcluster_pod(const EnvMap& env) {
  return lookup(env, "MS_SCHED_HOST") && lookup(env, "MS_WORKER_NUM") &&
         lookup(env, "MS_LOCAL_WORKER") && lookup(env, "MS_NODE_RANK");
}

namespace {

constexpr EnumTable<ClusterKind, 5> kClusterKinds({{{ClusterKind::kAuto, "auto"},
                                                    {ClusterKind::kSlurm, "slurm"},
                                                    {ClusterKind::kMpi, "mpi"},
                                                    {ClusterKind::kK8s, "k8s"},
                                                    {ClusterKind::kNone, "none"}}});

}  // namespace

ClusterKind parse_cluster_kind(const std::string& name, const std::string& source) {
  return kClusterKinds.parse(name, source);
}

std::vector<int> parse_tasks_per_node(const std::string& text, const std::string& source) {
  std::vector<int> counts;
  for (std::string_view item : split(text, ',')) {
    const auto paren = item.find('(');
    const auto count = parse_integer(item.substr(0, paren), 0, 1'000'000);
    int repeat = 1;
    if (paren != std::string_view::npos) {
      // "2(x3)": three nodes with two tasks each.
      const auto close = item.find(')', paren);
      const auto times =
          item.size() > paren + 2 && item[paren + 1] == 'x' && close != std::string_view::npos
              ? parse_integer(item.substr(paren + 2, close - paren - 2), 1, 1'000'000)
              : std::nullopt;
      if (!times)
        throw UsageError(fmt::format("{}='{}': '{}' is not N or N(xM)", source, text, item));
      repeat = static_cast<int>(*times);
    }
    if (!count)
      throw UsageError(fmt::format("{}='{}': '{}' is not N or N(xM)", source, text, item));
    counts.insert(counts.end(), static_cast<size_t>(repeat), static_cast<int>(*count));
  }
  return counts;
}

int port_for_job(const std::string& job_id) {
  // Numeric Slurm job ids map directly; anything else through a stable hash.
  const auto numeric = parse_integer(job_id, 0, (1LL << 62));
  const unsigned long long key =
      numeric ? static_cast<unsigned long long>(*numeric) : std::hash<std::string>{}(job_id);
  return kDerivedPortBase + static_cast<int>(key % kDerivedPortCount);
}

ClusterDefaults detect_cluster(const EnvMap& env, ClusterKind requested, int agents_per_node) {
  switch (requested) {
    case ClusterKind::kNone:
      return {};
    case ClusterKind::kSlurm:
      return detect_slurm(env, agents_per_node, true);
    case ClusterKind::kMpi:
      return detect_mpi(env, agents_per_node);
    case ClusterKind::kK8s:
      return mindcluster_pod(env) ? detect_mindcluster(env) : detect_k8s(env, true);
    case ClusterKind::kAuto:
      break;
  }
  if (lookup(env, "SLURM_JOB_ID")) return detect_slurm(env, agents_per_node, false);
  if (lookup(env, "OMPI_COMM_WORLD_SIZE")) return detect_mpi(env, agents_per_node);
  if (mindcluster_pod(env)) return detect_mindcluster(env);
  // A pod of a PyTorchJob: Kubernetes plus the per-pod variables of the job.
  if (lookup(env, "KUBERNETES_SERVICE_HOST") && lookup(env, "WORLD_SIZE") && lookup(env, "RANK")) {
    return detect_k8s(env, false);
  }
  return {};
}

}  // namespace npu_run
