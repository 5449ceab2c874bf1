// Before each attempt, this node's devices must be free (workers/device_holders.hpp): a process
// of the job that still holds one (an escaped grandchild, a worker that outlived SIGKILL in
// the driver) is killed; a foreign one is named and waited for up to --device-release-timeout,
// re-checked every 100 ms (its close is no event npu_run can wait on). Then the attempt starts,
// or the node reports the devices still held, a fault of the node (a spare takes its seat).
// Where npu-smi is installed its process rows count too (every second, under a timeout): the
// driver sees holders /proc cannot, such as a process of another container.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "basics/environment.hpp"
#include "config/launch_config.hpp"
#include "health/npu_smi_output.hpp"
#include "workers/device_holders.hpp"

namespace npu_run {

class ChildExits;
class ToolCall;
struct ToolRun;

struct DeviceReleaseSettings {
  HolderSearch search;
  std::chrono::milliseconds timeout{30'000};       // --device-release-timeout
  std::string npu_smi;                             // its path; empty: /proc alone
  std::vector<int> devices;                        // physical ids, to place npu-smi's rows
  std::string device_prefix;                       // "/dev/davinci": npu-smi's holders are named so
  std::chrono::milliseconds call_timeout{15'000};  // one npu-smi call
};

// This node's: its device nodes under $NPU_RUN_DEV_ROOT (else /dev), npu-smi from PATH unless
// the devices are NVIDIA's, `mark` the agent's ("NPU_RUN_AGENT_MARK=<mark>").
DeviceReleaseSettings device_release_settings(const LaunchConfig& cfg, const EnvMap& env,
                                              std::string mark);

class DeviceRelease {
 public:
  // `done(held)`: empty when the devices are free, else what holds them at the deadline.
  using Done = std::function<void(const std::string& held)>;

  DeviceRelease(boost::asio::io_context& io, DeviceReleaseSettings settings);
  ~DeviceRelease();
  void start(Done done);
  void cancel();

 private:
  void check();
  void ask_npu_smi(std::vector<std::string> arguments);
  void npu_smi_answered(const ToolRun& run);
  void npu_smi_unusable(const std::string& why);
  void decide();

  std::shared_ptr<char> alive_ = std::make_shared<char>();  // for the answers of calls
  boost::asio::io_context& io_;
  boost::asio::steady_timer timer_;
  DeviceReleaseSettings settings_;
  std::chrono::steady_clock::time_point deadline_{};
  bool told_waiting_ = false;
  Done done_;
  uint64_t cycle_ = 0;  // a call's answer from before the last start() or cancel() is ignored
  std::unique_ptr<ChildExits> exits_;
  std::shared_ptr<ToolCall> call_;
  std::vector<ChipMapRow> chip_map_;    // `npu-smi info -m`, asked once
  bool npu_smi_failed_ = false;         // it gave no answer once: /proc alone from then on
  std::vector<DeviceHolder> reported_;  // npu-smi's holders at its last answer
};

}  // namespace npu_run
