// Writes one of FaultDiag's npu_info files (health/npu_info_file.hpp) from the agent's loop:
// the commands one at a time (hccn_tool refuses a second call: a "busy" answer is tried again),
// each under the per-call timeout of --health-timeout and all within its budget. The file is
// written whole once the last answer is in, the budget ran out or it was cancelled (to
// FILE.tmp, then renamed), with what answered by then. Never blocks the loop.
#pragma once

#include <chrono>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "health/gate_settings.hpp"
#include "health/npu_info_file.hpp"

namespace boost::asio {
class io_context;
}

namespace npu_run {

class ChildExits;
class ToolCall;

class NpuInfoSnapshot : public std::enable_shared_from_this<NpuInfoSnapshot> {
 public:
  struct Settings {
    HealthToolPaths tools;
    std::vector<int> devices;  // this job's, physical ids
    HealthRunSettings run;
    std::string path;
  };
  NpuInfoSnapshot(boost::asio::io_context& io, ChildExits& exits, Settings settings);
  ~NpuInfoSnapshot();

  // Collects and writes; `done` runs once from the loop when the file is written.
  void start(std::function<void()> done);
  // Stops what runs and writes what answered; `done` still runs.
  void cancel();

 private:
  void run_next();
  void answered(const ToolRun& run);
  void finish();

  boost::asio::io_context& io_;
  ChildExits& exits_;
  Settings settings_;
  std::deque<NpuInfoEntry> waiting_;
  bool chips_known_ = false;  // `npu-smi info -m` answered (or there is no npu-smi)
  std::string text_;
  std::shared_ptr<ToolCall> running_;
  int tries_ = 0;  // of the running entry
  struct Timers;
  std::unique_ptr<Timers> timers_;
  bool out_of_budget_ = false;
  std::function<void()> done_;
};

}  // namespace npu_run
