// The agent's console (its stdout and stderr) as the event loop sees it. While the loop runs,
// writes are queued and a thread of the console's own does the blocking write(2): a reader that
// stops reading (`| less`, an ssh session that stops draining) stops only that thread, never the
// heartbeats, signals and exits the loop handles. Before and after the loop, writes go straight
// to the descriptor, as in any program.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/core/noncopyable.hpp>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

namespace npu_run {

class ConsoleStream {
 public:
  // Bytes queued before the stream counts as full: what a console that fell behind may still
  // get later; beyond it, worker output is dropped from the console copy or held in the pipes.
  static constexpr size_t kCapacity = size_t{4} << 20;

  explicit ConsoleStream(int fd) : fd_(fd) {}
  ~ConsoleStream() { stop_queue(); }
  ConsoleStream(const ConsoleStream&) = delete;
  ConsoleStream& operator=(const ConsoleStream&) = delete;

  int fd() const { return fd_; }
  // From now on writes are queued for the writer thread.
  void start_queue();
  // Waits until everything queued is written (or the console is gone), then writes directly
  // again. Callbacks still waiting for room are dropped: their loop has ended.
  void stop_queue();

  // npu_run's own lines and what must not be lost: always written (queued when queuing).
  // `source` says who wrote it (a relay, or nullptr for npu_run): a line another source left
  // open (a progress bar without its newline) is ended first, so lines never run together.
  void write(const void* source, std::string_view bytes, bool leaves_line_open = false);
  // Ends `source`'s line if it is the one left open (a worker's last line without '\n').
  void end_line(const void* source);
  // Worker output that also went to a file: written when there is room, else counted as dropped
  // (`lines` of it); a notice gives the count and `full_copy` once the console has caught up.
  // The notice is logged on `io`'s thread.
  bool offer(boost::asio::io_context& io, const void* source, std::string_view bytes,
             bool leaves_line_open, size_t lines, const std::string& full_copy);
  bool has_room() const;
  // Runs `ready` on `io`'s thread once the queue has room again (at once when it has).
  void when_room(boost::asio::io_context& io, std::function<void()> ready);
  // Reports the lines dropped since the last notice, if any (called at the end of the loop).
  void report_dropped();

 private:
  struct Waiter {
    boost::asio::io_context* io;
    std::function<void()> ready;
  };
  void enqueue(const void* source, std::string_view bytes, bool leaves_line_open);
  void writer_main();
  void wake_waiters_locked();

  const int fd_;
  mutable std::mutex mutex_;
  std::condition_variable work_;
  std::condition_variable idle_;
  std::deque<std::string> queue_;
  size_t queued_bytes_ = 0;
  bool queuing_ = false;
  bool stopping_ = false;
  bool broken_ = false;  // EPIPE or another write error: the console is gone, output is skipped
  std::vector<Waiter> waiters_;
  const void* open_line_source_ = nullptr;
  // Dropped-lines accounting, touched by the loop thread only.
  size_t dropped_lines_ = 0;
  std::string dropped_full_copy_;
  std::thread thread_;
};

// The process's console streams (fds 1 and 2).
ConsoleStream& console_out();
ConsoleStream& console_err();

// Queues both console streams for as long as it lives; declared around the event loop.
class QueuedConsole : boost::noncopyable {
 public:
  QueuedConsole();
  ~QueuedConsole();
};

}  // namespace npu_run
