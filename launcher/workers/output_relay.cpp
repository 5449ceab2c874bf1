#include "workers/output_relay.hpp"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <utility>

#include "basics/descriptors.hpp"
#include "workers/console.hpp"
#include "workers/line_copy.hpp"
#include "workers/log_health.hpp"

namespace npu_run {

void LinePrefixer::feed(std::string_view data, std::string& out) {
  while (!data.empty()) {
    // The prefix goes before every line, an empty one too (as torchrun's), but not before the
    // '\n' of a "\r\n".
    if (state_ == State::kLineStart || (state_ == State::kAfterReturn && data.front() != '\n'))
      out += prefix_;
    const auto end = data.find_first_of("\r\n");
    if (end == std::string_view::npos) {
      out.append(data);
      state_ = State::kInLine;
      return;
    }
    out.append(data.substr(0, end + 1));
    state_ = data[end] == '\n' ? State::kLineStart : State::kAfterReturn;
    data.remove_prefix(end + 1);
  }
}

void LinePrefixer::finish(std::string& out) {
  if (state_ != State::kLineStart) out += '\n';
  state_ = State::kLineStart;
}

OutputRelay::OutputRelay(boost::asio::io_context& io, int pipe_fd, int file_fd,
                         std::string file_path, ConsoleStream* console, std::string prefix,
                         std::unique_ptr<DuplicateLines> copies)
    : io_(io),
      pipe_(io, pipe_fd),
      file_fd_(file_fd),
      file_path_(std::move(file_path)),
      console_(console),
      prefixer_(std::move(prefix)),
      copies_(std::move(copies)) {
  pipe_.non_blocking(true);
}

OutputRelay::~OutputRelay() {
  on_closed_ = nullptr;  // whoever waited for it is gone too
  finish();
}

void OutputRelay::start() {
  read_more();
}

void OutputRelay::read_more() {
  read_in_flight_ = true;
  pipe_.async_read_some(
      boost::asio::buffer(buffer_),
      [this, self = shared_from_this()](const boost::system::error_code& ec, size_t n) {
        read_in_flight_ = false;
        if (closed_) return;
        if (n > 0) deliver(std::string_view(buffer_.data(), n));
        if (draining_) {
          drain_now();
        } else if (paused_) {
          // Resumed by the console once it has room; the worker waits meanwhile.
          console_->when_room(io_, [this, self] {
            paused_ = false;
            if (!closed_ && !draining_) read_more();
          });
        } else if (!ec) {
          read_more();
        }
        // EOF: nothing more will come; drain_and_close() finishes up.
      });
}

void OutputRelay::deliver(std::string_view data) {
  if (file_fd_ >= 0 && !write_fully(file_fd_, data)) {
    // Disk full or similar: said once, with the file; the console copy goes on.
    write_error_ = errno;
    spdlog::error("cannot write {}: {}; the file is incomplete from here on{}", file_path_,
                  errno_label(write_error_),
                  console_ != nullptr ? ", the console still gets this stream" : "");
    ::close(file_fd_);
    file_fd_ = -1;
  }
  if (copies_) copies_->feed(data);
  if (tail_limit_ > 0) {
    tail_.append(data);
    if (tail_.size() > 2 * tail_limit_) tail_.erase(0, tail_.size() - tail_limit_);
  }
  if (console_ != nullptr) to_console(data);
}

std::string OutputRelay::tail() const {
  return tail_.size() <= tail_limit_ ? tail_ : tail_.substr(tail_.size() - tail_limit_);
}

void OutputRelay::to_console(std::string_view data) {
  std::string lines;
  prefixer_.feed(data, lines);
  if (file_fd_ >= 0) {
    // The file has it all: the console copy may lose what the console cannot take.
    console_->offer(io_, this, lines, prefixer_.line_open(),
                    static_cast<size_t>(std::count(data.begin(), data.end(), '\n')), file_path_);
    return;
  }
  console_->write(this, lines, prefixer_.line_open());
  paused_ = !console_->has_room();
}

void OutputRelay::drain_and_close(std::function<void()> closed) {
  if (closed_) {
    closed();
    return;
  }
  on_closed_ = std::move(closed);
  if (draining_) return;
  draining_ = true;
  if (read_in_flight_) {
    // The pending read may already hold bytes in buffer_ whose handler has not run yet (the
    // exit and the last output arrive in the same reactor pass): reading now would overwrite
    // them. Its handler, run at once by the cancellation if it holds nothing, drains instead.
    boost::system::error_code ignored;
    pipe_.cancel(ignored);
    return;
  }
  drain_now();
}

void OutputRelay::drain_now() {
  // What is left in the pipe is at most its capacity: queued for the console even when full.
  boost::system::error_code ec;
  while (true) {
    const size_t n = pipe_.read_some(boost::asio::buffer(buffer_), ec);
    if (n > 0) deliver(std::string_view(buffer_.data(), n));
    if (ec || n == 0) break;  // would_block: the pipe is empty; eof: the writers are gone
  }
  finish();
}

void OutputRelay::finish() {
  if (closed_) return;
  closed_ = true;
  if (console_ != nullptr && prefixer_.line_open()) console_->end_line(this);
  if (copies_) copies_->finish();
  boost::system::error_code ignored;
  pipe_.cancel(ignored);
  pipe_.close(ignored);
  if (file_fd_ >= 0) ::close(file_fd_);
  file_fd_ = -1;
  if (auto closed = std::exchange(on_closed_, nullptr)) closed();
}

}  // namespace npu_run
