#include "agent/health/health_runner.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <utility>

#include "agent/health/tool_call.hpp"

namespace npu_run {

namespace asio = boost::asio;

struct HealthRunner::Timers {
  explicit Timers(asio::io_context& io) : budget(io) {}
  asio::steady_timer budget;
  std::map<Lane, std::unique_ptr<asio::steady_timer>> pauses;  // before a busy call's retry
};

HealthRunner::HealthRunner(asio::io_context& io, ChildExits& exits, NodeCheckSettings checks,
                           HealthRunSettings settings)
    : io_(io),
      exits_(exits),
      plan_(std::move(checks)),
      settings_(settings),
      timers_(std::make_unique<Timers>(io)) {}

HealthRunner::~HealthRunner() = default;

void HealthRunner::start(Done done, Done early) {
  done_ = std::move(done);
  early_ = std::move(early);
  started_ = std::chrono::steady_clock::now();
  timers_->budget.expires_after(settings_.budget);
  timers_->budget.async_wait([weak = weak_from_this()](boost::system::error_code cancelled) {
    if (auto self = weak.lock(); self && !cancelled) self->budget_ran_out();
  });
  enqueue(plan_.first_calls());
  maybe_done();
}

void HealthRunner::cancel() {
  done_ = nullptr;
  early_ = nullptr;
  idle_ = nullptr;
  timers_->budget.cancel();
  for (auto& [lane, queue] : queues_) {
    queue.waiting.clear();
    if (queue.running) queue.running->cancel();
  }
}

HealthRunner::Lane HealthRunner::lane_of(const PlannedCall& call) {
  return {call.tool, call.tool == HealthTool::kHccnTool ? call.device : -1};
}

void HealthRunner::enqueue(std::vector<PlannedCall> calls) {
  for (PlannedCall& call : calls) {
    const Lane lane = lane_of(call);
    queues_[lane].waiting.push_back(std::move(call));
    if (!queues_[lane].running) next(lane);
  }
}

void HealthRunner::hold(std::function<void()> idle) {
  held_ = true;
  idle_ = std::move(idle);
  for (auto& [lane, queue] : queues_) {
    if (queue.running && !queue.preempted && queue.waiting.front().warn_only) {
      queue.preempted = true;
      queue.running->cancel();  // answered() keeps it first in its queue
    }
  }
  for (const auto& [lane, queue] : queues_) {
    if (queue.running) return;  // answered() runs `idle` once the last one ends
  }
  asio::post(io_, [weak = weak_from_this()] {
    if (auto self = weak.lock(); self && self->idle_) std::exchange(self->idle_, nullptr)();
  });
}

void HealthRunner::resume() {
  held_ = false;
  idle_ = nullptr;
  for (auto& [lane, queue] : queues_) next(lane);
}

bool HealthRunner::busy() const {
  return std::any_of(queues_.begin(), queues_.end(),
                     [](const auto& q) { return q.second.running || !q.second.waiting.empty(); });
}

void HealthRunner::next(Lane lane) {
  Queue& queue = queues_[lane];
  if (queue.running || queue.waiting.empty() || !done_ || held_) return;
  if (out_of_budget_) {
    for (const PlannedCall& call : queue.waiting) {
      plan_.never_ran(call, fmt::format("not run: the health checks' budget of {:.1f} s ran out",
                                        std::chrono::duration<double>(settings_.budget).count()));
    }
    queue.waiting.clear();
    return;
  }
  const PlannedCall call = queue.waiting.front();
  ++queue.tries;
  queue.running = ToolCall::start(io_, exits_, call.argv, settings_.call_timeout,
                                  [weak = weak_from_this(), lane, call](ToolRun run) {
                                    if (auto self = weak.lock())
                                      self->answered(lane, call, std::move(run));
                                  });
}

void HealthRunner::answered(Lane lane, const PlannedCall& call, ToolRun run) {
  Queue& queue = queues_[lane];
  queue.running.reset();
  if (!done_) return;
  if (held_ && idle_ && std::none_of(queues_.begin(), queues_.end(), [](const auto& q) {
        return q.second.running != nullptr;
      })) {
    asio::post(io_, [weak = weak_from_this()] {
      if (auto self = weak.lock(); self && self->idle_) std::exchange(self->idle_, nullptr)();
    });
  }
  if (std::exchange(queue.preempted, false)) {
    queue.tries = 0;
    next(lane);  // stays first: runs again once not held (resume())
    return;
  }
  if (run.busy() && queue.tries < settings_.busy_tries && !out_of_budget_) {
    auto& pause = timers_->pauses[lane];
    if (!pause) pause = std::make_unique<asio::steady_timer>(io_);
    pause->expires_after(settings_.busy_pause);
    pause->async_wait([weak = weak_from_this(), lane](boost::system::error_code cancelled) {
      if (auto self = weak.lock(); self && !cancelled) self->next(lane);
    });
    // `running` stays empty and the call stays first: next() runs it again.
    return;
  }
  run.attempts = queue.tries;
  queue.tries = 0;
  if (run.elapsed_ms >= slowest_ms_) {
    slowest_ms_ = run.elapsed_ms;
    slowest_call_ = run.command_line();
  }
  queue.waiting.pop_front();
  if (out_of_budget_ && run.end == ToolRun::End::kTimedOut) {
    plan_.never_ran(
        call,
        fmt::format("{}: stopped when the health checks' budget of {:.1f} s ran out",
                    run.command_line(), std::chrono::duration<double>(settings_.budget).count()));
  } else {
    enqueue(plan_.record(call, run));
  }
  next(lane);
  maybe_done();
}

void HealthRunner::budget_ran_out() {
  out_of_budget_ = true;
  for (auto& [lane, queue] : queues_) {
    if (queue.running) {
      queue.running->cancel();
    } else {
      next(lane);  // reports what waits as not run
    }
  }
  maybe_done();
}

bool HealthRunner::gating_calls_left() const {
  return std::any_of(queues_.begin(), queues_.end(), [](const auto& q) {
    return std::any_of(q.second.waiting.begin(), q.second.waiting.end(),
                       [](const PlannedCall& call) { return !call.warn_only; });
  });
}

NodeVerdict HealthRunner::verdict_so_far() const {
  NodeVerdict verdict = plan_.verdict();
  verdict.elapsed_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                           std::chrono::steady_clock::now() - started_)
                           .count();
  verdict.slowest_call = slowest_call_;
  verdict.slowest_ms = slowest_ms_;
  return verdict;
}

void HealthRunner::maybe_done() {
  if (!done_) return;
  if (!busy()) {
    timers_->budget.cancel();
    early_ = nullptr;  // the whole verdict is in: no early one
    std::exchange(done_, nullptr)(verdict_so_far());
    return;
  }
  // A call that answers stays first in its queue until then: a waiting gating call is one that
  // runs or will.
  if (early_ && !gating_calls_left()) std::exchange(early_, nullptr)(verdict_so_far());
}

}  // namespace npu_run
