// Progress beats (NPU_RUN_PROGRESS, issue 18): one Unix datagram socket per local rank, in a
// private directory of the agent's. Every datagram sent there, by the worker or any process it
// started, is one beat of that rank; its text (the first kMaxBeatText bytes) is the rank's last
// progress. Read by events on the agent's io_context: a collection drains every queued datagram,
// so workers beating a thousand times a second cost one wake-up per burst, and a worker that
// beats faster than the agent reads loses beats in its own non-blocking send, never time.
// Beats are collected every 5 ms at most: their times are that much late at worst.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace boost::asio {
class io_context;
}

namespace npu_run {

constexpr size_t kMaxBeatText = 200;
// The first byte of an automatic beat (--auto-progress: npu_run's own, once per optimizer step;
// agent/rooms/python_hooks_room.cpp). A rank's first beat without it, the script's own, ends the
// automatic ones for the rest of the job: a script that beats itself says best what progress is.
constexpr char kAutomaticBeatMark = '\x01';

struct RankProgress {
  uint64_t beats = 0;  // this attempt's
  std::string text;    // of the last beat
  std::chrono::steady_clock::time_point last{};
  std::chrono::system_clock::time_point last_wall{};   // for messages and `npu_run status`
  std::chrono::system_clock::time_point first_wall{};  // this attempt's first, for the timeline
  // The longest silence between two beats, over every attempt (for --hang-timeout auto).
  std::chrono::steady_clock::duration longest_interval{};
  // It sent a beat of its own (not automatic), in this attempt or an earlier one.
  bool beats_itself = false;
};

// How far a rank got, to compare attempts: the last whole number in its last beat's text
// ("epoch 2 step 1200 loss 0.5" -> 1200), else how many beats it sent.
int64_t progress_value(const RankProgress& progress);

class ProgressBeats {
 public:
  // Creates the directory (mode 0700 under $TMPDIR, else /tmp; a socket's path must fit in
  // 107 bytes) and `local_ranks` sockets, close-on-exec. Throws std::runtime_error naming what
  // failed.
  ProgressBeats(boost::asio::io_context& io, int local_ranks);
  ~ProgressBeats();  // removes the sockets and the directory
  ProgressBeats(const ProgressBeats&) = delete;
  ProgressBeats& operator=(const ProgressBeats&) = delete;

  // What a worker gets as NPU_RUN_PROGRESS.
  std::string path(int local_rank) const;
  // The agent's private directory the sockets are in (workers/agent_directory.hpp).
  const std::string& directory() const;
  // Takes the beats still queued now, not at the next collection (every 5 ms): a worker's
  // last beat before it died is part of what its failure says.
  void collect_now();
  // A new attempt: no rank has beaten in it yet (the longest intervals are kept).
  void new_attempt();
  const RankProgress& rank(int local_rank) const;
  int local_ranks() const;

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;
};

}  // namespace npu_run
