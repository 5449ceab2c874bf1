// Warnings about connections that never became agents: port scanners, random bytes, wrong
// tokens, idle sockets. The first one is logged at once (it is usually a misconfigured node
// worth seeing); later ones are counted and summarized at most once per interval, so that a
// flood of strangers cannot flood the log too.
#pragma once

#include <spdlog/spdlog.h>

#include <chrono>
#include <string>

namespace npu_run::rdzv {

class StrangerLog {
 public:
  using Clock = std::chrono::steady_clock;

  explicit StrangerLog(std::chrono::milliseconds interval) : interval_(interval) {}

  void record(const std::string& what, Clock::time_point now) {
    if (!logged_once_ || now - last_log_ >= interval_) {
      flush(now, true);
      spdlog::warn("rendezvous server: {}", what);
      logged_once_ = true;
      last_log_ = now;
      return;
    }
    ++pending_;
    last_pending_ = what;
  }

  // Logs the summary of what was counted since the last line, once the interval has passed (or
  // at once with `force`).
  void flush(Clock::time_point now, bool force = false) {
    if (pending_ == 0 || (!force && now - last_log_ < interval_)) return;
    spdlog::warn(
        "rendezvous server: {} more connection(s) refused or dropped before they "
        "authenticated; the last: {}",
        pending_, last_pending_);
    pending_ = 0;
    last_log_ = now;
  }

 private:
  std::chrono::milliseconds interval_;
  Clock::time_point last_log_{};
  bool logged_once_ = false;
  size_t pending_ = 0;
  std::string last_pending_;
};

}  // namespace npu_run::rdzv
