#include "agent/core/attempt_log.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <map>

#include "agent/hangs/hang_stacks.hpp"
#include "agent/plan/worker_env.hpp"
#include "agent/records/failure_summary.hpp"
#include "basics/exit_status.hpp"
#include "rendezvous/protocol/describe.hpp"

namespace npu_run {

namespace {

const char* plural(size_t n) {
  return n == 1 ? "" : "s";
}

// Where the workers meet, under the framework's name for it: the port node 0's agent chose is
// MindSpore's scheduler's or the TF Adapter's chief's there, not a store.
std::string meeting_point(const LaunchConfig& cfg, const Assignment& a) {
  const std::string at = fmt::format("{}:{}", a.worker_master_addr, a.worker_master_port);
  switch (cfg.worker.framework) {
    case Framework::kMindSpore:
      if (cfg.ascend.rank_table.index() != 0 || cfg.worker.ms_simulation) return "";
      return ", MindSpore's scheduler at " + at;
    case Framework::kTensorFlow:
      return cfg.worker.tf_cluster == TfCluster::kEnv ? ", the TF Adapter's chief at " + at : "";
    case Framework::kTorch:
      break;
  }
  const char* store = cfg.rendezvous.worker_store == WorkerStore::kTiered && cfg.shape.multi_node()
                          ? " (this node's proxy of node 0's store)"
                      : cfg.rendezvous.worker_store == WorkerStore::kTorch
                          ? " (hosted by worker rank 0)"
                          : "";
  return fmt::format(", workers' store at {}{}", at, store);
}

}  // namespace

void log_attempt_start(const LaunchConfig& cfg, const Assignment& a, const EnvMap& agent_env,
                       size_t workers) {
  if (a.restart_count == 0 && omp_threads_defaulted(cfg, agent_env)) {
    spdlog::info(
        "OMP_NUM_THREADS is unset: setting it to 1 for each of the {} workers (export it to "
        "choose)",
        cfg.shape.nproc_per_node);
  }
  spdlog::info("starting {} worker{} (ranks {}-{} of {}, node {} of {}, attempt {}){}", workers,
               plural(workers), a.rank_offset, a.rank_offset + cfg.shape.nproc_per_node - 1,
               a.world_size, a.node_rank, a.nnodes, a.restart_count, meeting_point(cfg, a));
}

void log_report_sent(const rdzv::Report& report, int nnodes) {
  if (nnodes <= 1) return;
  if (report.outcome == rdzv::Outcome::kFailed && report.failure) {
    spdlog::error("this node's workers failed ({}); waiting for the other nodes to stop",
                  rdzv::describe(*report.failure));
  }
  // A node done first stays until the job's result is known (exit barrier): say so, or a
  // finished node that does not exit looks hung.
  if (report.outcome == rdzv::Outcome::kSucceeded)
    spdlog::info("this node's workers exited 0; waiting for the job's result from the other nodes");
}

void log_restart(const LaunchConfig& cfg, const rdzv::Decision& d, const Attempt& attempt) {
  const size_t workers = attempt.result.workers.size();
  if (d.membership_change) {
    const auto* reform = attempt.job_stop ? std::get_if<rdzv::Reform>(&*attempt.job_stop) : nullptr;
    const std::string cause = reform ? rdzv::describe(*reform) : "nodes joined or left";
    spdlog::info(
        "the job re-forms ({}); restarting all {} workers in a new round, not counted as a "
        "restart ({} of {} used)",
        cause, workers, d.restart_count, cfg.supervision.max_restarts);
    return;
  }
  const std::string cause = d.root_cause ? rdzv::describe(*d.root_cause) : "a failure";
  const std::string why = d.class_reason.empty() ? "" : fmt::format(" [{}]", d.class_reason);
  if (d.restarts_charged < d.restart_count &&
      d.failure_class == rdzv::FailureClass::kInfrastructure) {
    spdlog::warn(
        "the job failed ({}){}; restarting all {} workers as attempt {}, not counted against "
        "--max-restarts ({} of {} used)",
        cause, why, workers, d.restart_count, d.restarts_charged, cfg.supervision.max_restarts);
    return;
  }
  spdlog::warn("the job failed ({}){}; restarting all {} workers: restart {} of {}", cause, why,
               workers, d.restarts_charged, cfg.supervision.max_restarts);
}

void log_success(const Attempt& attempt) {
  const GroupResult& result = attempt.result;
  // MindSpore's scheduler is among the outcomes with local rank -1.
  const auto scheduler =
      static_cast<size_t>(std::count_if(result.workers.begin(), result.workers.end(),
                                        [](const WorkerOutcome& w) { return w.local_rank < 0; }));
  const size_t workers = result.workers.size() - scheduler;
  spdlog::info("all {} worker{}{} exited 0 after {:.2f} s", workers, plural(workers),
               scheduler > 0 ? " and MindSpore's scheduler" : "",
               std::chrono::duration<double>(result.elapsed).count());
}

void log_job_failure(const LaunchConfig& cfg, const rdzv::Decision& d, Attempt& attempt) {
  const Assignment& a = attempt.assignment;
  if (d.failure_class == rdzv::FailureClass::kDeterministic) {
    spdlog::error(
        "{}: not restarting (exit {}: restarting or requeueing the job would fail the same way)",
        d.class_reason, kExitNoProgress);
  } else if (d.exit_code == kExitNoProgress) {
    const int n = cfg.supervision.max_no_progress_restarts;
    spdlog::error(
        "no rank beat past its best in the last {} restart{}: not restarting (exit {}: "
        "restarting or requeueing the job would repeat it)",
        n, plural(static_cast<size_t>(n)), kExitNoProgress);
  }
  bool root_here =
      d.root_cause && d.root_cause->node_rank == a.node_rank && d.root_cause->host == a.host;
  // After a hang the job's comparison of every rank's stack may blame another rank.
  if (attempt.hangs && attempt.hangs->dumped())
    root_here = apply_hang_decision(attempt.result, d, a.node_rank, a.host) ||
                (root_here && !d.root_cause->hang);
  if (attempt.result.outcome != GroupResult::Outcome::kSucceeded) {
    print_summary(attempt.result, a,
                  root_here || !d.root_cause
                      ? ""
                      : fmt::format("a failure on node {} ({})", d.root_cause->node_rank,
                                    d.root_cause->host));
  }
  if (d.root_cause && (!root_here || a.nnodes > 1))
    spdlog::error("the job failed; root cause: {}", rdzv::describe(*d.root_cause));
  if (d.root_cause && d.failure_class != rdzv::FailureClass::kDeterministic &&
      !d.class_reason.empty())
    spdlog::error("failure class: {}", d.class_reason);
}

void print_summary(const GroupResult& result, const Assignment& a,
                   const std::string& stopped_because) {
  std::map<size_t, WorkerError> errors;
  for (size_t i = 0; i < result.workers.size(); ++i) {
    if (!result.workers[i].error_file.empty())
      errors[i] = read_worker_error(result.workers[i].error_file);
  }
  std::string table = format_failure_summary(
      result, SummaryContext{a.host, a.node_rank, a.restart_count, stopped_because}, errors);
  if (!table.empty() && table.back() == '\n') table.pop_back();
  spdlog::error("{}", table);
}

}  // namespace npu_run
