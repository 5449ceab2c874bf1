// Copies one worker stream from its pipe to a log file and/or the console, line-prefixed, as
// the data arrives (event driven: no polling of files, unlike torchrun's tee). The console is
// never waited for: with a log file beside it, what the console cannot take is dropped from the
// console copy only; as the only destination, a full console pauses the reading of the pipe, so
// the worker waits as it would on an inherited terminal, and the agent never does.
#pragma once

#include <array>
#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

namespace npu_run {

class ConsoleStream;
class DuplicateLines;

// Puts the prefix at the start of every line as the bytes arrive, without holding back an
// unfinished line: a progress bar redrawn with '\r' reaches the console when it is written, and
// each redraw keeps its prefix.
class LinePrefixer {
 public:
  explicit LinePrefixer(std::string prefix) : prefix_(std::move(prefix)) {}
  // Appends `data` to `out` with the prefixes it needs.
  void feed(std::string_view data, std::string& out);
  // Ends a line left open (a last line without '\n').
  void finish(std::string& out);
  // True when the last byte fed left a line unfinished.
  bool line_open() const { return state_ != State::kLineStart; }

 private:
  enum class State : uint8_t { kLineStart, kAfterReturn, kInLine };
  std::string prefix_;
  State state_ = State::kLineStart;
};

// Owned through shared_ptr: a read still queued in the io_context keeps its relay alive.
class OutputRelay : public std::enable_shared_from_this<OutputRelay> {
 public:
  // Takes ownership of `pipe_fd` and `file_fd` (-1: no file), which was opened at `file_path`.
  // `console` (nullptr: none) is the agent's stdout or stderr.
  // `copies` (nullptr: none) receives the stream too, for --duplicate-*-filters.
  OutputRelay(boost::asio::io_context& io, int pipe_fd, int file_fd, std::string file_path,
              ConsoleStream* console, std::string prefix,
              std::unique_ptr<DuplicateLines> copies = nullptr);
  ~OutputRelay();
  OutputRelay(const OutputRelay&) = delete;
  OutputRelay& operator=(const OutputRelay&) = delete;

  void start();
  // Called once the worker has exited: copies what is still in the pipe without waiting for
  // EOF (a grandchild may hold the write end open), then closes everything and runs `closed`.
  // With a read in flight this completes in that read's handler (it may hold bytes not yet
  // delivered), so what was relayed (tail(), write_error()) is final only in `closed`.
  void drain_and_close(std::function<void()> closed);
  // Keeps the last `bytes` bytes relayed, for tail(): a hang's stack dump is read back from
  // them (workers/python_dump.hpp).
  void keep_tail(size_t bytes) { tail_limit_ = bytes; }
  // The last bytes relayed, at most what keep_tail() asked for.
  std::string tail() const;
  // The errno of a failed write to the file (0: none), after which the file was given up.
  int write_error() const { return write_error_; }
  const std::string& file_path() const { return file_path_; }

 private:
  void read_more();
  void drain_now();
  void deliver(std::string_view data);
  void to_console(std::string_view data);
  void finish();

  boost::asio::io_context& io_;
  boost::asio::posix::stream_descriptor pipe_;
  int file_fd_;
  std::string file_path_;
  ConsoleStream* console_;
  LinePrefixer prefixer_;
  std::unique_ptr<DuplicateLines> copies_;
  std::array<char, size_t{64} * 1024> buffer_{};
  bool read_in_flight_ = false;
  bool paused_ = false;  // the console is full and this relay's output has no other copy
  bool draining_ = false;
  bool closed_ = false;
  int write_error_ = 0;
  std::function<void()> on_closed_;
  size_t tail_limit_ = 0;
  std::string tail_;  // up to twice tail_limit_: trimmed in halves, not on every read
};

}  // namespace npu_run
