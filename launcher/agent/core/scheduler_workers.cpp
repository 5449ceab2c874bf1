#include "agent/core/scheduler_workers.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <boost/asio/steady_timer.hpp>
#include <csignal>

namespace npu_run {

namespace {

class SchedulerBesideWorkers : public RoundWorkers {
 public:
  SchedulerBesideWorkers(boost::asio::io_context& io, std::unique_ptr<RoundWorkers> scheduler,
                         std::unique_ptr<RoundWorkers> workers, std::chrono::milliseconds grace,
                         std::vector<pid_t> spare)
      : scheduler_(std::move(scheduler)),
        workers_(std::move(workers)),
        grace_(io),
        grace_period_(grace),
        spare_(std::move(spare)) {}

  void start(DoneHandler on_done) override {
    on_done_ = std::move(on_done);
    scheduler_->start([this](GroupResult r) { scheduler_ended(std::move(r)); });
    workers_->start([this](GroupResult r) { workers_ended(std::move(r)); });
  }
  void forward_signal(int sig) override {
    scheduler_->forward_signal(sig);
    workers_->forward_signal(sig);
  }
  // The workers first; the scheduler once they have ended (at once if they have: it may be in
  // its grace), or with a second call (escalation).
  void stop(int sig) override {
    if ((stop_asked_ || workers_result_) && !scheduler_result_) scheduler_->stop(sig);
    stop_asked_ = true;
    stop_signal_ = sig;
    workers_->stop(sig);
  }
  std::vector<pid_t> running_pids() const override {
    std::vector<pid_t> pids = workers_->running_pids();
    const std::vector<pid_t> scheduler = scheduler_->running_pids();
    pids.insert(pids.end(), scheduler.begin(), scheduler.end());
    return pids;
  }
  pid_t pid_of(int local_rank) const override { return workers_->pid_of(local_rank); }
  void on_each_exit(const WorkerGroup::ExitHandler& handler) override {
    workers_->on_each_exit(handler);
  }

 private:
  void scheduler_ended(GroupResult result) {
    scheduler_result_ = std::move(result);
    if (!workers_result_) {
      if (scheduler_result_->outcome == GroupResult::Outcome::kFailed) {
        workers_stopped_for_scheduler_ = true;
        spdlog::error("stopping the workers: MindSpore's scheduler ended while they ran");
        workers_->stop(SIGTERM);
      }
      return;
    }
    grace_.cancel();
    finish();
  }

  void workers_ended(GroupResult result) {
    workers_result_ = std::move(result);
    if (scheduler_result_) return finish();
    if (workers_result_->outcome != GroupResult::Outcome::kSucceeded || stop_asked_) {
      scheduler_->stop(stop_asked_ ? stop_signal_ : SIGTERM);
      return;
    }
    grace_.expires_after(grace_period_);
    grace_.async_wait([this](boost::system::error_code cancelled) {
      if (cancelled || scheduler_result_) return;
      spdlog::warn(
          "MindSpore's scheduler still runs {:.0f} s after every worker ended: stopping it",
          std::chrono::duration<double>(grace_period_).count());
      scheduler_->stop(SIGTERM);
    });
  }

  void finish() {
    if (!on_done_) return;
    auto done = std::exchange(on_done_, nullptr);
    for (const GroupResult* r : {&*workers_result_, &*scheduler_result_}) {
      for (const WorkerOutcome& w : r->workers) {
        if (w.survived_kill) spare_.push_back(w.pid);
      }
    }
    sweep_escaped_processes(spare_);
    done(merge_scheduler_result(std::move(*workers_result_), std::move(*scheduler_result_),
                                workers_stopped_for_scheduler_));
  }

  std::unique_ptr<RoundWorkers> scheduler_;
  std::unique_ptr<RoundWorkers> workers_;
  boost::asio::steady_timer grace_;
  std::chrono::milliseconds grace_period_;
  std::vector<pid_t> spare_;
  DoneHandler on_done_;
  std::optional<GroupResult> scheduler_result_, workers_result_;
  bool workers_stopped_for_scheduler_ = false;
  bool stop_asked_ = false;
  int stop_signal_ = SIGTERM;
};

}  // namespace

std::unique_ptr<RoundWorkers> scheduler_beside_workers(boost::asio::io_context& io,
                                                       std::unique_ptr<RoundWorkers> scheduler,
                                                       std::unique_ptr<RoundWorkers> workers,
                                                       std::chrono::milliseconds grace,
                                                       std::vector<pid_t> spare) {
  return std::make_unique<SchedulerBesideWorkers>(io, std::move(scheduler), std::move(workers),
                                                  grace, std::move(spare));
}

std::unique_ptr<RoundWorkers> round_workers(boost::asio::io_context& io,
                                            const MakeRoundWorkers& make,
                                            std::vector<WorkerSpec> specs,
                                            std::optional<WorkerSpec> scheduler, StopPolicy policy,
                                            pid_t guardian_pid) {
  if (!scheduler) return make(std::move(specs), policy);
  spdlog::info("starting MindSpore's scheduler (MS_ROLE=MS_SCHED) on {}:{}",
               lookup(scheduler->env, "MS_SCHED_HOST").value_or("?"),
               lookup(scheduler->env, "MS_SCHED_PORT").value_or("?"));
  policy.sweep_escaped = false;
  auto scheduler_group = make({std::move(*scheduler)}, policy);
  auto workers = make(std::move(specs), policy);
  std::vector<pid_t> spare;
  if (guardian_pid > 0) spare.push_back(guardian_pid);
  return scheduler_beside_workers(io, std::move(scheduler_group), std::move(workers),
                                  kSchedulerGrace, std::move(spare));
}

GroupResult merge_scheduler_result(GroupResult workers, GroupResult scheduler,
                                   bool workers_stopped_for_it) {
  GroupResult merged = std::move(workers);
  if (scheduler.workers.empty()) return merged;
  WorkerOutcome outcome = scheduler.workers.front();
  outcome.local_rank = -1;
  outcome.global_rank = -1;
  // Stopped by npu_run (the round failed, or it outlived the grace): not a failure of its own.
  const bool failed_by_itself =
      scheduler.outcome == GroupResult::Outcome::kFailed && !outcome.stopped_by_agent;
  merged.workers.push_back(std::move(outcome));
  const size_t index = merged.workers.size() - 1;
  // The earliest error is the root cause: a scheduler that failed before the workers' root
  // cause (who then lost it), or after every worker succeeded.
  const bool earlier = !merged.root_cause || failed_at(merged.workers[index]) <
                                                 failed_at(merged.workers[*merged.root_cause]);
  // Workers stopped from outside (a signal to npu_run) stay stopped; stopped because the
  // scheduler ended, they failed with it.
  const bool stopped_outside =
      merged.outcome == GroupResult::Outcome::kStopped && !workers_stopped_for_it;
  if (failed_by_itself && earlier && !stopped_outside) {
    merged.outcome = GroupResult::Outcome::kFailed;
    merged.root_cause = index;
    merged.first_exit = index;
  }
  merged.elapsed = std::max(merged.elapsed, scheduler.elapsed);
  return merged;
}

}  // namespace npu_run
