// One call of an outside tool (npu-smi, hccn_tool, nvidia-smi, --health-check-cmd) on the
// agent's loop: started as a helper in a process group of its own, its output read up to a cap,
// killed with its group when it outlives its timeout. Such tools block for minutes when a
// device is not ready, so no call ever runs without a timeout, and none blocks the loop.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "health/tool_run.hpp"

namespace boost::asio {
class io_context;
}

namespace npu_run {

class ChildExits;

class ToolCall {
 public:
  using Done = std::function<void(ToolRun)>;
  // Starts `argv` (argv[0] a path, or a name looked up on PATH) and calls `done` once from the
  // loop when it ended and its output is read, or when it was killed.
  static std::shared_ptr<ToolCall> start(boost::asio::io_context& io, ChildExits& exits,
                                         std::vector<std::string> argv,
                                         std::chrono::milliseconds timeout, Done done);
  // The same with `env` as its whole environment ("NAME=value"), not npu_run's.
  static std::shared_ptr<ToolCall> start(boost::asio::io_context& io, ChildExits& exits,
                                         std::vector<std::string> argv,
                                         const std::vector<std::string>& env,
                                         std::chrono::milliseconds timeout, Done done);
  // Kills it now; `done` still comes, with End::kTimedOut.
  virtual void cancel() = 0;
  virtual ~ToolCall() = default;
};

}  // namespace npu_run
