// The host-agent's end of its ssh session's stdin: first the preamble line, read before the
// agent starts, then "stop SIGNAL" lines while it runs. EOF is the launcher gone (killed, its
// host down, the network between them cut): the agent treats it as its parent dying.
#pragma once

#include <array>
#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

namespace npu_run {

// Reads one line (without its '\n') from `fd`, blocking for at most `timeout`; what was read
// past it is left in `rest`. Throws std::runtime_error when it does not come in time, the input
// ends first, or the line is longer than `max_bytes`.
std::string read_line_with_deadline(int fd, std::chrono::milliseconds timeout, size_t max_bytes,
                                    std::string& rest);

class ControlChannel : public std::enable_shared_from_this<ControlChannel> {
 public:
  // A line longer than this is no stop line; it is skipped.
  static constexpr size_t kMaxLine = 256;

  // Takes ownership of `fd`.
  ControlChannel(boost::asio::io_context& io, int fd, std::function<void(int sig)> on_stop,
                 std::function<void()> on_closed);
  // Handles `already_read` (what came behind the preamble), then reads on; both from the loop,
  // after whatever was posted before.
  void start(std::string already_read);
  void close();

 private:
  void read_more();
  void feed(std::string_view data);

  boost::asio::posix::stream_descriptor input_;
  std::function<void(int)> on_stop_;
  std::function<void()> on_closed_;
  std::array<char, 1024> buffer_{};
  std::string line_;
  bool skipping_ = false;  // inside a line too long to be a stop line
};

}  // namespace npu_run
