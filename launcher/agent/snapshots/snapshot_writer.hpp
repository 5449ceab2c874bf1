// Writes snapshots from the agent's memory to storage on a thread of its own, so that a slow
// shared file system never stalls the agent's loop (agent/rooms/snapshot_room.cpp): a temporary
// name beside the target, fsync, rename, fsync of the directory, as a crash-safe save does. One job
// at a time, in order; a newer snapshot of a rank supersedes one of that rank still waiting. Files
// beyond --checkpoint-keep are deleted here too (an unlink on NFS can take as long as a write).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace boost::asio {
class io_context;
}

namespace npu_run {

struct SnapshotWrite {
  int rank = 0;  // local
  int64_t step = 0;
  std::string segment;  // the file in the agent's memory
  std::string path;     // where it goes
};

struct SnapshotWritten {
  SnapshotWrite write;
  std::string error;  // empty: written
  bool gone = false;  // its segment was dropped before the write began: nothing to do
  uint64_t bytes = 0;
  double seconds = 0;
};

class SnapshotWriter {
 public:
  // `done` runs on `io`'s loop after each write, never after the writer is gone.
  SnapshotWriter(boost::asio::io_context& io, std::function<void(const SnapshotWritten&)> done);
  // Drops what waits, ends the write in progress at its next chunk (its temporary file removed)
  // and joins the thread.
  ~SnapshotWriter();
  SnapshotWriter(const SnapshotWriter&) = delete;
  SnapshotWriter& operator=(const SnapshotWriter&) = delete;

  // Returns the step of the rank's write it superseded, if one was waiting.
  std::optional<int64_t> write(SnapshotWrite job);
  void remove(std::vector<std::string> paths);
  // Writes waiting or in progress.
  size_t outstanding() const { return outstanding_; }
  // Runs `drained` on the loop once no write is outstanding (at once if none is).
  void when_drained(std::function<void()> drained);

 private:
  struct Job {
    SnapshotWrite write;
    std::vector<std::string> removals;  // a removal job when not empty
  };
  void run();
  void finished(const SnapshotWritten& written);

  boost::asio::io_context& io_;
  std::function<void(const SnapshotWritten&)> done_;
  std::shared_ptr<SnapshotWriter*> alive_;              // reset first by the destructor
  const std::weak_ptr<SnapshotWriter*> watch_{alive_};  // what the thread's posts check
  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<Job> jobs_;
  std::atomic<bool> stop_{false};
  size_t outstanding_ = 0;  // loop side
  std::vector<std::function<void()>> drained_;
  std::thread thread_;
};

}  // namespace npu_run
