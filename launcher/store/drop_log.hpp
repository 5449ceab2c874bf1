// The one warning line per second that a store (or a node's proxy) writes when it closes a
// client's connection: a flood of bad clients must not flood the agent's log, and the lines
// that were held back are counted in the next one.
#pragma once

#include <chrono>
#include <string>

namespace npu_run::store {

class DropLog {
 public:
  // `who`: "workers' store", "workers' store proxy".
  explicit DropLog(std::string who) : who_(std::move(who)) {}
  void dropped(const std::string& peer, const std::string& why);

 private:
  std::string who_;
  std::chrono::steady_clock::time_point last_{};
  size_t held_back_ = 0;
};

}  // namespace npu_run::store
