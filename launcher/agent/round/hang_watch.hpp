// Hung workers (issue 18): a worker that has beaten (workers/progress_beats.hpp) and then stays
// silent past the hang timeout, or that still runs --exit-timeout after every other local
// worker exited 0 (torch 1.13's gloo exit deadlock, pytorch/pytorch#56297). One timer, armed at
// the earliest deadline; a beat only stamps its rank, so beating costs the watch nothing.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "config/launch_config.hpp"
#include "workers/progress_beats.hpp"

namespace boost::asio {
class io_context;
}

namespace npu_run {

struct Hang {
  // kRecorderTimeout: a flight recorder's watchdog dumped the rank (agent/recorder_watch_room).
  enum class Kind { kNoProgress, kStraggler, kRecorderTimeout };
  Kind kind = Kind::kNoProgress;
  int local_rank = 0;
  std::chrono::milliseconds timeout{};            // the one that ran out
  std::chrono::steady_clock::duration silence{};  // since its last beat, or the others' exit
  uint64_t beats = 0;
  std::string last_text;        // of its last beat
  std::string recorder_dump{};  // kRecorderTimeout: the file its watchdog wrote
  std::chrono::system_clock::time_point found_at = std::chrono::system_clock::now();
};

// "no progress for 600 s after 'step 1200'", "still running 30 s after the other 7 local
// workers exited 0".
std::string describe(const Hang& hang, int other_workers);

// The timeout for a rank under `policy`, given the longest silence between beats seen so far.
std::chrono::milliseconds hang_timeout(const HangPolicy& policy,
                                       std::chrono::steady_clock::duration longest_interval);

class HangWatch {
 public:
  using HangHandler = std::function<void(const Hang&)>;
  HangWatch(boost::asio::io_context& io, const ProgressBeats& beats, HangPolicy policy,
            HangHandler on_hang);
  ~HangWatch();
  HangWatch(const HangWatch&) = delete;
  HangWatch& operator=(const HangWatch&) = delete;

  // An attempt's workers started (every local rank running); the watch runs until stop() or
  // the first hang, which it reports once.
  void start();
  void exited(int local_rank, bool success);
  void stop();

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;
};

}  // namespace npu_run
