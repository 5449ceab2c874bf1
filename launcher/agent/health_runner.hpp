// Runs a node's health checks (health/node_checks.hpp) on the agent's loop: each tool's calls
// one at a time (hccn_tool answers "busy" to a second one, exit 11: such a call is run again
// after a pause), different tools side by side, every call under its own timeout and the whole
// under a budget; what the budget cuts off is reported as not run. Never blocks the loop.
#pragma once

#include <chrono>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <string>

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

  // Runs the checks; `done` is called once from the loop with the verdict.
  void start(Done done);
  // Kills what runs; `done` is not called.
  void cancel();

 private:
  struct Queue {
    std::deque<PlannedCall> waiting;
    std::shared_ptr<ToolCall> running;
    int tries = 0;  // of the running call
  };
  void enqueue(std::vector<PlannedCall> calls);
  void next(HealthTool tool);
  void answered(HealthTool tool, const PlannedCall& call, ToolRun run);
  void budget_ran_out();
  void maybe_done();

  boost::asio::io_context& io_;
  ChildExits& exits_;
  NodeCheckPlan plan_;
  HealthRunSettings settings_;
  std::map<HealthTool, Queue> queues_;
  struct Timers;
  std::unique_ptr<Timers> timers_;
  std::chrono::steady_clock::time_point started_;
  bool out_of_budget_ = false;
  std::string slowest_call_;  // the call that took longest, for the blame of a slow round
  int64_t slowest_ms_ = 0;
  Done done_;
};

}  // namespace npu_run
