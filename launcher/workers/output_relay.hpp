// Copies one worker stream from its pipe to a log file and/or the console, line-prefixed, as
// the data arrives (event driven: no polling of files, unlike torchrun's tee).
#pragma once

#include <array>
#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <memory>
#include <string>

namespace npu_run {

// Splits bytes into lines and prefixes each complete line; keeps the unfinished tail.
class LinePrefixer {
 public:
  explicit LinePrefixer(std::string prefix) : prefix_(std::move(prefix)) {}
  // Appends the prefixed complete lines in `data` to `out`.
  void feed(std::string_view data, std::string& out);
  // Appends what is left (a last line without '\n') as a line of its own.
  void finish(std::string& out);

 private:
  // A line longer than this is flushed in pieces, so a worker printing without newlines
  // cannot grow the agent's memory.
  static constexpr size_t kMaxPending = size_t{64} * 1024;
  std::string prefix_;
  std::string pending_;
};

// Owned through shared_ptr: a read still queued in the io_context keeps its relay alive.
class OutputRelay : public std::enable_shared_from_this<OutputRelay> {
 public:
  // Takes ownership of `pipe_fd` and `file_fd` (-1: no file). `console_fd` (-1: none) is
  // borrowed: the agent's stdout or stderr.
  OutputRelay(boost::asio::io_context& io, int pipe_fd, int file_fd, int console_fd,
              std::string prefix);
  ~OutputRelay();
  OutputRelay(const OutputRelay&) = delete;
  OutputRelay& operator=(const OutputRelay&) = delete;

  void start();
  // Called once the worker has exited: copies what is still in the pipe without waiting for
  // EOF (a grandchild may hold the write end open), then closes everything. With a read in
  // flight this completes in that read's handler, which the io_context runs before anything
  // posted after this call.
  void drain_and_close();

 private:
  void read_more();
  void drain_now();
  void deliver(std::string_view data);
  void finish();

  boost::asio::posix::stream_descriptor pipe_;
  int file_fd_;
  int console_fd_;
  LinePrefixer prefixer_;
  std::array<char, size_t{64} * 1024> buffer_{};
  bool read_in_flight_ = false;
  bool draining_ = false;
  bool closed_ = false;
};

// write(2) until everything is written or an error other than EINTR occurs.
bool write_all(int fd, std::string_view data);

}  // namespace npu_run
