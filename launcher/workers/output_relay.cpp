#include "workers/output_relay.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

namespace npu_run {

bool write_all(int fd, std::string_view data) {
  while (!data.empty()) {
    const ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    data.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

void LinePrefixer::feed(std::string_view data, std::string& out) {
  while (!data.empty()) {
    const auto newline = data.find('\n');
    if (newline == std::string_view::npos) {
      pending_.append(data);
      if (pending_.size() >= kMaxPending) finish(out);
      return;
    }
    out += prefix_;
    out += pending_;
    out.append(data.substr(0, newline + 1));
    pending_.clear();
    data.remove_prefix(newline + 1);
  }
}

void LinePrefixer::finish(std::string& out) {
  if (pending_.empty()) return;
  out += prefix_;
  out += pending_;
  out += '\n';
  pending_.clear();
}

OutputRelay::OutputRelay(boost::asio::io_context& io, int pipe_fd, int file_fd, int console_fd,
                         std::string prefix)
    : pipe_(io, pipe_fd), file_fd_(file_fd), console_fd_(console_fd), prefixer_(std::move(prefix)) {
  pipe_.non_blocking(true);
}

OutputRelay::~OutputRelay() {
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
        } else if (!ec) {
          read_more();
        }
        // EOF: nothing more will come; drain_and_close() finishes up.
      });
}

void OutputRelay::deliver(std::string_view data) {
  if (file_fd_ >= 0 && !write_all(file_fd_, data)) {
    ::close(file_fd_);  // disk full or similar: keep relaying to the console at least
    file_fd_ = -1;
  }
  if (console_fd_ >= 0) {
    std::string lines;
    prefixer_.feed(data, lines);
    // A closed console (EPIPE after the terminal went away) must not stop the job.
    if (!lines.empty() && !write_all(console_fd_, lines)) console_fd_ = -1;
  }
}

void OutputRelay::drain_and_close() {
  if (closed_ || draining_) return;
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
  if (console_fd_ >= 0) {
    std::string tail;
    prefixer_.finish(tail);
    if (!tail.empty()) write_all(console_fd_, tail);
  }
  boost::system::error_code ignored;
  pipe_.cancel(ignored);
  pipe_.close(ignored);
  if (file_fd_ >= 0) ::close(file_fd_);
  file_fd_ = -1;
}

}  // namespace npu_run
