// Which process a MindSpore round blames (agent/core/scheduler_workers.hpp): the earliest error,
// the scheduler's only when it failed by itself.
#include <catch2/catch.hpp>

#include "agent/core/scheduler_workers.hpp"

namespace test_scheduler_result {

using namespace npu_run;
using Clock = std::chrono::system_clock;

namespace {

const Clock::time_point t0 = Clock::time_point() + std::chrono::hours(1000);

WorkerOutcome ended(int local_rank, int code, std::chrono::milliseconds at, bool stopped = false) {
  WorkerOutcome w;
  w.local_rank = local_rank;
  w.global_rank = local_rank;
  w.status = ExitStatus::exited(code);
  w.finished_at = t0 + at;
  w.stopped_by_agent = stopped;
  return w;
}

GroupResult group(std::vector<WorkerOutcome> workers, std::optional<size_t> root,
                  GroupResult::Outcome outcome) {
  GroupResult r;
  r.workers = std::move(workers);
  r.root_cause = root;
  r.first_exit = root;
  r.outcome = outcome;
  return r;
}

GroupResult scheduler(int code, std::chrono::milliseconds at, bool stopped = false) {
  return group({ended(0, code, at, stopped)}, code == 0 ? std::nullopt : std::optional<size_t>(0),
               code == 0 ? GroupResult::Outcome::kSucceeded : GroupResult::Outcome::kFailed);
}

const auto kOk = GroupResult::Outcome::kSucceeded;
const auto kFailed = GroupResult::Outcome::kFailed;

}  // namespace

TEST_CASE("scheduler result: the scheduler is added, and blamed only for its own earliest error",
          "[framework]") {
  using std::chrono::milliseconds;
  const GroupResult good =
      group({ended(0, 0, milliseconds(5)), ended(1, 0, milliseconds(6))}, std::nullopt, kOk);
  // Both good: one more outcome, rank -1, nothing failed.
  GroupResult r = merge_scheduler_result(good, scheduler(0, milliseconds(9)), false);
  REQUIRE(r.workers.size() == 3);
  CHECK(r.workers[2].local_rank == -1);
  CHECK(r.workers[2].global_rank == -1);
  CHECK(r.outcome == kOk);
  // The scheduler failing after every worker succeeded fails the round.
  r = merge_scheduler_result(good, scheduler(3, milliseconds(9)), false);
  CHECK(r.outcome == kFailed);
  CHECK(r.root_cause == 2u);
  // Stopped by npu_run once the workers ended: no failure of its own.
  r = merge_scheduler_result(good, scheduler(143, milliseconds(9), true), false);
  CHECK(r.outcome == kOk);
  // A worker failed first, the scheduler (who lost it) after: the worker is the root cause.
  const GroupResult worker_failed =
      group({ended(0, 0, milliseconds(5)), ended(1, 7, milliseconds(6))}, 1u, kFailed);
  r = merge_scheduler_result(worker_failed, scheduler(1, milliseconds(8)), true);
  CHECK(r.root_cause == 1u);
  // The scheduler failed first, the workers stopped for it: the scheduler.
  const GroupResult stopped_for_it =
      group({ended(0, 143, milliseconds(5), true), ended(1, 1, milliseconds(6))}, 1u, kFailed);
  r = merge_scheduler_result(stopped_for_it, scheduler(3, milliseconds(2)), true);
  CHECK(r.root_cause == 2u);
  CHECK(r.outcome == kFailed);
  // Workers stopped by a signal to npu_run stay stopped, whatever the scheduler did.
  GroupResult signalled =
      group({ended(0, 143, milliseconds(5), true)}, std::nullopt, GroupResult::Outcome::kStopped);
  r = merge_scheduler_result(signalled, scheduler(1, milliseconds(6)), false);
  CHECK(r.outcome == GroupResult::Outcome::kStopped);
  CHECK_FALSE(r.root_cause);
}

}  // namespace test_scheduler_result
