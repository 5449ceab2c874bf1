// What a cluster's launcher environment says about this agent's place in a job: Slurm steps
// (srun), Open MPI (mpirun) and Kubernetes pods (Kubeflow PyTorchJob). These values are
// defaults: a command-line flag or PET_ variable always wins.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "basics/environment.hpp"

namespace npu_run {

enum class ClusterKind { kAuto, kNone, kSlurm, kMpi, kK8s };

// "slurm", "mpi", "k8s", "none", "auto"; throws UsageError naming `source`.
ClusterKind parse_cluster_kind(const std::string& name, const std::string& source);

// Master ports derived from a job id fall in [kDerivedPortBase, kDerivedPortBase +
// kDerivedPortCount): below the kernel's ephemeral range and far from HCCL's ports, and the same on
// every node.
inline constexpr int kDerivedPortBase = 20000;
inline constexpr int kDerivedPortCount = 10000;

// What the environment said, for the log: not configuration.
struct ClusterFacts {
  std::string description;  // "Slurm job 123 step 0"; empty: no scheduler found
  // "name = value (source)" for every value taken from the environment, logged once.
  std::vector<std::string> detected;
  std::vector<std::string> warnings;
};

struct ClusterDefaults {
  ClusterKind kind = ClusterKind::kNone;
  ClusterFacts facts;
  std::optional<int> nnodes;
  std::optional<int> node_rank;
  std::optional<std::string> master_addr;
  std::optional<int> master_port;
  std::optional<std::string> run_id;
  int agent_index = 0;  // which of the agents that share this node this one is (device slice)
};

// `agents_per_node` is --agents-per-node: more agents than that on one node is refused
// (UsageError: the classic srun/mpirun mistake); with more than one allowed, every agent is a
// node of the rendezvous. Throws UsageError when a forced kind finds no such environment.
ClusterDefaults detect_cluster(const EnvMap& env, ClusterKind requested, int agents_per_node);

// A MindSpore pod of MindCluster's operator: MS_SCHED_HOST, MS_WORKER_NUM, MS_LOCAL_WORKER and
// MS_NODE_RANK are set (read as launch defaults, like a PyTorchJob's; --framework mindspore and
// --nproc-per-node MS_LOCAL_WORKER follow unless given).
bool mindcluster_pod(const EnvMap& env);

// Slurm's "2(x3),1" task counts per node -> 2,2,2,1; throws UsageError naming `source`.
std::vector<int> parse_tasks_per_node(const std::string& text, const std::string& source);

// The port derived from a job id (documented range above).
int port_for_job(const std::string& job_id);

}  // namespace npu_run
