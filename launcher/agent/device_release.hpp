// Before each attempt, this node's devices must be free (workers/device_holders.hpp): a process
// of the job that still holds one (an escaped grandchild, a worker that outlived SIGKILL in
// the driver) is killed; a foreign one is named and waited for up to --device-release-timeout,
// re-checked every 100 ms (its close is no event npu_run can wait on). Then the attempt starts,
// or the node reports the devices still held, a fault of the node (a spare takes its seat).
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <functional>
#include <string>

#include "workers/device_holders.hpp"

namespace npu_run {

class DeviceRelease {
 public:
  // `done(held)`: empty when the devices are free, else what holds them at the deadline.
  using Done = std::function<void(const std::string& held)>;

  DeviceRelease(boost::asio::io_context& io, HolderSearch search,
                std::chrono::milliseconds timeout);
  void start(Done done);
  void cancel();

 private:
  void check();

  boost::asio::steady_timer timer_;
  HolderSearch search_;
  std::chrono::milliseconds timeout_;
  std::chrono::steady_clock::time_point deadline_{};
  bool told_waiting_ = false;
  Done done_;
};

}  // namespace npu_run
