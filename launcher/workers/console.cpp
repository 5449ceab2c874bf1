#include "workers/console.hpp"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <boost/asio/post.hpp>

#include "basics/descriptors.hpp"

namespace npu_run {

namespace {

// Queued chunks are merged up to this size: one write(2) per chunk, not one per worker line.
constexpr size_t kMergeLimit = size_t{64} * 1024;

}  // namespace

void ConsoleStream::start_queue() {
  const std::lock_guard lock(mutex_);
  if (queuing_) return;
  queuing_ = true;
  stopping_ = false;
  thread_ = std::thread([this] { writer_main(); });
}

void ConsoleStream::stop_queue() {
  {
    const std::lock_guard lock(mutex_);
    if (!queuing_) return;
    stopping_ = true;
  }
  work_.notify_one();
  thread_.join();
  const std::lock_guard lock(mutex_);
  queuing_ = false;
  waiters_.clear();
}

void ConsoleStream::write(const void* source, std::string_view bytes, bool leaves_line_open) {
  if (bytes.empty()) return;
  enqueue(source, bytes, leaves_line_open);
}

void ConsoleStream::end_line(const void* source) {
  bool open = false;
  {
    const std::lock_guard lock(mutex_);
    open = open_line_source_ == source;
  }
  if (open) enqueue(source, "\n", false);
}

bool ConsoleStream::offer(boost::asio::io_context& io, const void* source, std::string_view bytes,
                          bool leaves_line_open, size_t lines, const std::string& full_copy) {
  if (has_room()) {
    write(source, bytes, leaves_line_open);
    return true;
  }
  if (dropped_lines_ == 0) {
    dropped_full_copy_ = full_copy;
    when_room(io, [this] { report_dropped(); });
  }
  dropped_lines_ += lines;
  return false;
}

bool ConsoleStream::has_room() const {
  const std::lock_guard lock(mutex_);
  return queued_bytes_ < kCapacity;
}

void ConsoleStream::when_room(boost::asio::io_context& io, std::function<void()> ready) {
  const std::lock_guard lock(mutex_);
  if (queued_bytes_ < kCapacity || !queuing_) {
    boost::asio::post(io, std::move(ready));
  } else {
    waiters_.push_back(Waiter{&io, std::move(ready)});
  }
}

void ConsoleStream::report_dropped() {
  if (dropped_lines_ == 0) return;
  spdlog::warn(
      "the console (fd {}) could not keep up: {} line{} of worker output were left out of it; "
      "the log files have everything (e.g. {})",
      fd_, dropped_lines_, dropped_lines_ == 1 ? "" : "s", dropped_full_copy_);
  dropped_lines_ = 0;
  dropped_full_copy_.clear();
}

void ConsoleStream::enqueue(const void* source, std::string_view bytes, bool leaves_line_open) {
  std::unique_lock lock(mutex_);
  if (broken_) return;
  std::string chunk;
  // Another source's unfinished line (a progress bar) is ended, so the two never run together.
  if (open_line_source_ != nullptr && open_line_source_ != source) chunk += '\n';
  open_line_source_ = leaves_line_open ? source : nullptr;
  chunk.append(bytes);
  if (!queuing_) {
    // Before and after the loop: nothing else waits on this thread.
    if (!write_fully(fd_, chunk)) broken_ = true;
    return;
  }
  queued_bytes_ += chunk.size();
  if (!queue_.empty() && queue_.back().size() + chunk.size() <= kMergeLimit) {
    queue_.back() += chunk;
  } else {
    queue_.push_back(std::move(chunk));
  }
  lock.unlock();
  work_.notify_one();
}

void ConsoleStream::writer_main() {
  std::unique_lock lock(mutex_);
  while (true) {
    work_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping, and everything is written
    std::string chunk = std::move(queue_.front());
    queue_.pop_front();
    const bool skip = broken_;
    lock.unlock();
    const bool written = skip || write_fully(fd_, chunk);
    lock.lock();
    if (!written) broken_ = true;
    queued_bytes_ -= chunk.size();
    // Half empty before waking: a relay paused at the limit resumes with room for a while.
    if (queued_bytes_ <= kCapacity / 2) wake_waiters_locked();
  }
}

void ConsoleStream::wake_waiters_locked() {
  for (Waiter& waiter : waiters_) boost::asio::post(*waiter.io, std::move(waiter.ready));
  waiters_.clear();
}

ConsoleStream& console_out() {
  static ConsoleStream stream(STDOUT_FILENO);
  return stream;
}

ConsoleStream& console_err() {
  static ConsoleStream stream(STDERR_FILENO);
  return stream;
}

QueuedConsole::QueuedConsole() {
  console_out().start_queue();
  console_err().start_queue();
}

QueuedConsole::~QueuedConsole() {
  console_out().report_dropped();
  console_err().report_dropped();
  console_out().stop_queue();
  console_err().stop_queue();
}

}  // namespace npu_run
