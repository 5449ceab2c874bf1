// --framework and --tf-cluster: which worker environment contract a launch gives, and the
// combinations that mean nothing for it, refused by name before anything starts.
#include <fmt/format.h>

#include "basics/usage_error.hpp"
#include "cli/resolvers.hpp"
#include "cli/value_parsers.hpp"

namespace npu_run {

namespace {

Framework parse_framework(const Flag<std::string>& flag) {
  check_choice(*flag, {"torch", "mindspore", "tensorflow"}, flag.source());
  return *flag == "mindspore"    ? Framework::kMindSpore
         : *flag == "tensorflow" ? Framework::kTensorFlow
                                 : Framework::kTorch;
}

// MindSpore's scheduler and the TF Adapter's chief listen on a port node 0's agent holds (the
// held port of --worker-store torch): no TCPStore of npu_run's would be used by anyone.
void refuse_store_choice(const LaunchInputs& in, const std::string& what, const std::string& who) {
  const Flag<std::string>& store = in.options.shape.worker_store;
  if (!store.given() || *store == "torch") return;
  throw UsageError(fmt::format(
      "{} {} means nothing with {}: its processes meet at {} on a port node 0's agent holds, "
      "not at a TCPStore; drop {}",
      store.source(), *store, what, who, store.source()));
}

// The TF Adapter configures nothing when a CM_* cluster meets these (REFERENCE 10).
void refuse_rank_variables(const LaunchInputs& in) {
  for (const char* name : {"RANK_TABLE_FILE", "RANK_ID", "RANK_SIZE"}) {
    if (const auto value = lookup(in.env, name)) {
      throw UsageError(fmt::format(
          "{}={} is set, but --tf-cluster env gives the TF Adapter its cluster through CM_* "
          "variables, and with {} present it configures neither; unset {} (or use "
          "--tf-cluster rank-table)",
          name, *value, name, name));
    }
  }
}

}  // namespace

void resolve_framework(const LaunchInputs& in, LaunchConfig& cfg) {
  const WorkerFlags& f = in.options.worker;
  WorkerCommand& worker = cfg.worker;
  worker.framework = parse_framework(f.framework);
  // A MindCluster MindSpore pod runs MindSpore unless told otherwise.
  if (!f.framework.given() && mindcluster_pod(in.env)) worker.framework = Framework::kMindSpore;
  check_choice(*f.tf_cluster, {"rank-table", "env"}, f.tf_cluster.source());
  worker.tf_cluster = *f.tf_cluster == "env" ? TfCluster::kEnv : TfCluster::kRankTable;
  const bool rank_table = cfg.ascend.rank_table.index() != 0;
  if (f.tf_cluster.given() && worker.framework != Framework::kTensorFlow) {
    throw UsageError(fmt::format("{} {} is for --framework tensorflow, not {}; drop it",
                                 f.tf_cluster.source(), *f.tf_cluster, *f.framework));
  }
  if (worker.framework == Framework::kMindSpore && *f.virtual_local_rank) {
    throw UsageError(fmt::format(
        "{} with {} mindspore: MindSpore reads DEVICE_ID (the physical id), not LOCAL_RANK, and "
        "a narrowed ASCEND_RT_VISIBLE_DEVICES would put that id outside what the worker sees; "
        "drop {}",
        f.virtual_local_rank.source(), f.framework.source(), f.virtual_local_rank.source()));
  }
  if (worker.framework == Framework::kMindSpore && !rank_table) {
    const std::string what = f.framework.source() + " mindspore";
    refuse_store_choice(in, what, "MindSpore's scheduler (MS_SCHED_HOST:MS_SCHED_PORT)");
    cfg.rendezvous.worker_store = WorkerStore::kTorch;
  }
  if (worker.framework != Framework::kTensorFlow) return;
  if (worker.tf_cluster == TfCluster::kEnv) {
    if (rank_table) {
      throw UsageError(
          "--tf-cluster env with --rank-table: the TF Adapter configures neither when both "
          "are given; drop --rank-table (CM_* variables) or --tf-cluster env (a rank table)");
    }
    refuse_store_choice(in, "--tf-cluster env",
                        "the TF Adapter's chief (CM_CHIEF_IP:CM_CHIEF_PORT)");
    refuse_rank_variables(in);
    cfg.rendezvous.worker_store = WorkerStore::kTorch;
  } else if (!rank_table) {
    throw UsageError(fmt::format(
        "{} tensorflow needs a rank table for the TF Adapter: give --rank-table auto (npu_run "
        "builds it) or --rank-table FILE, or use --tf-cluster env (CM_* variables)",
        f.framework.source()));
  }
}

}  // namespace npu_run
