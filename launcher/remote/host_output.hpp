// One output stream (stdout or stderr) of an ssh session to a host. Its lines reach this
// npu_run's console whole (a host's lines already carry its name: its agent prefixes them), so
// that hosts' lines never cut into each other: an unfinished line is held until its '\n' or
// '\r' (a progress bar's redraw), for at most kLineWait (a prompt still shows) or kMaxPending
// bytes. The control lines npu_run's processes exchange (remote/control_lines.hpp) are taken out
// and handed on. While held, text is kept instead of shown: what ssh and the
// remote shell say before the host-agent runs is the error to report if it never does.
// A console that falls behind pauses the reading, so the host's workers wait as on a terminal.
#pragma once

#include <array>
#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

#include "remote/control_lines.hpp"

namespace npu_run {

class ConsoleStream;

class HostOutput : public std::enable_shared_from_this<HostOutput> {
 public:
  // A control line longer than this is not one: it is shown as text.
  static constexpr size_t kMaxControlLine = size_t{64} * 1024;
  // What is kept of held text: the end of it, where ssh says what went wrong.
  static constexpr size_t kMaxHeld = size_t{8} * 1024;
  // How long and how much of an unfinished line is held back.
  static constexpr auto kLineWait = std::chrono::milliseconds(50);
  static constexpr size_t kMaxPending = size_t{64} * 1024;

  using ControlHandler = std::function<void(const ControlLine&)>;

  // Takes ownership of `fd`.
  HostOutput(boost::asio::io_context& io, int fd, ConsoleStream& console, ControlHandler control,
             std::function<void()> on_end);
  HostOutput(const HostOutput&) = delete;
  HostOutput& operator=(const HostOutput&) = delete;

  void start();
  void hold() { holding_ = true; }
  // Shows what was held and stops holding.
  void release();
  // The text held so far (its last kMaxHeld bytes).
  const std::string& held() const { return held_; }
  // Closes the pipe; a read in flight ends.
  void close();

 private:
  void read_more();
  void feed(std::string_view data);
  void show(std::string_view text);
  void flush_pending();
  void end_control_line();

  boost::asio::io_context& io_;
  boost::asio::posix::stream_descriptor pipe_;
  ConsoleStream& console_;
  ControlHandler on_control_;
  std::function<void()> on_end_;
  std::array<char, 16384> buffer_{};
  bool at_line_start_ = true;
  bool in_control_ = false;
  std::string control_line_;
  bool holding_ = false;
  bool ended_ = false;  // the pipe reached its end
  std::string held_;
  std::string pending_;  // an unfinished line, held back
  boost::asio::steady_timer pending_timer_;
  bool timer_armed_ = false;
};

}  // namespace npu_run
