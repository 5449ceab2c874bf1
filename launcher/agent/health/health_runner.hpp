// Runs a node's health checks (health/node_checks.hpp) on the agent's loop, one call at a time
// per lane and the lanes side by side: one lane per tool, except hccn_tool's, one per device.
// hccn_tool's "busy" (exit 11) is the device's own answer to a second command while one runs
// (the driver's ds_net.c passes the device's reply on; the host takes a lock only to write TLS
// settings), so calls to different devices do not collide; a busy call is run again after a
// pause all the same. Every call runs under its own timeout and the whole under a budget; what
// the budget cuts off is reported as not run. Never blocks the loop.
// The verdict can come in two steps: once every call that can fail the node answered, and once
// the warning-only ones did too; and another runner's calls (the pings) can go first.
#pragma once

#include <chrono>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>

#include "health/gate_settings.hpp"
#include "health/node_checks.hpp"

namespace boost::asio {
class io_context;
}

namespace npu_run {

class ChildExits;
class ToolCall;

class HealthRunner : public std::enable_shared_from_this<HealthRunner> {
 public:
  using Done = std::function<void(NodeVerdict)>;
  HealthRunner(boost::asio::io_context& io, ChildExits& exits, NodeCheckSettings checks,
               HealthRunSettings settings);
  ~HealthRunner();

  // Runs the checks; `done` is called once from the loop with the whole verdict. `early`, when
  // given, is called before it, with the verdict so far, as soon as every call that can fail
  // the node answered while warning-only calls (PlannedCall::warn_only) still run; never when
  // none is left by then.
  void start(Done done, Done early = {});
  // Kills what runs; `done` is not called.
  void cancel();
  // Starts no new call until resume(); `idle` runs once no call is running (posted at once if
  // none is), so that another runner's calls go first on the node's tools. A warning-only call
  // in flight is stopped and asked again after resume(): it only reads, and what waits for the
  // other runner (the pings a round waits for) should not wait for it.
  void hold(std::function<void()> idle);
  void resume();
  // Whether calls are still waiting or running.
  bool busy() const;

 private:
  struct Queue {
    std::deque<PlannedCall> waiting;
    std::shared_ptr<ToolCall> running;
    int tries = 0;           // of the running call
    bool preempted = false;  // the running call was stopped by hold(): it runs again
  };
  // A tool, and for hccn_tool the device (-1 for every other tool).
  using Lane = std::pair<HealthTool, int>;
  static Lane lane_of(const PlannedCall& call);
  void enqueue(std::vector<PlannedCall> calls);
  void next(Lane lane);
  void answered(Lane lane, const PlannedCall& call, ToolRun run);
  void budget_ran_out();
  void maybe_done();
  bool gating_calls_left() const;
  NodeVerdict verdict_so_far() const;

  boost::asio::io_context& io_;
  ChildExits& exits_;
  NodeCheckPlan plan_;
  HealthRunSettings settings_;
  std::map<Lane, Queue> queues_;
  struct Timers;
  std::unique_ptr<Timers> timers_;
  std::chrono::steady_clock::time_point started_;
  bool out_of_budget_ = false;
  std::string slowest_call_;  // the call that took longest, for the blame of a slow round
  int64_t slowest_ms_ = 0;
  Done done_;
  Done early_;
  std::function<void()> idle_;  // hold()'s, until nothing runs
  bool held_ = false;
};

}  // namespace npu_run
