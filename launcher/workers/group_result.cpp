#include "workers/group_result.hpp"

namespace npu_run {

std::chrono::system_clock::time_point failed_at(const WorkerOutcome& worker) {
  if (worker.raised_at && *worker.raised_at < worker.finished_at) return *worker.raised_at;
  return worker.finished_at;
}

std::optional<size_t> choose_root_cause(const std::vector<WorkerOutcome>& workers,
                                        std::optional<size_t> first_exit) {
  std::optional<size_t> best = first_exit;
  for (size_t i = 0; i < workers.size(); ++i) {
    const WorkerOutcome& w = workers[i];
    if (!w.raised_at || w.status.success()) continue;
    if (!best || failed_at(w) < failed_at(workers[*best])) best = i;
  }
  return best;
}

int exit_code_for(const GroupResult& result) {
  switch (result.outcome) {
    case GroupResult::Outcome::kSucceeded:
      return 0;
    case GroupResult::Outcome::kStopped:
      return exit_for_signal(result.stop_signal);
    case GroupResult::Outcome::kFailed: {
      std::optional<size_t> owner = result.root_cause;
      if (owner && result.workers.at(*owner).stopped_by_agent) owner = result.first_exit;
      return owner ? result.workers.at(*owner).status.as_exit_code() : 1;
    }
  }
  return 1;
}

}  // namespace npu_run
