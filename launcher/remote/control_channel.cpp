#include "remote/control_channel.hpp"

#include <poll.h>
#include <unistd.h>

#include <boost/asio/post.hpp>
#include <cerrno>
#include <cstring>
#include <stdexcept>

#include "remote/control_lines.hpp"

namespace npu_run {

std::string read_line_with_deadline(int fd, std::chrono::milliseconds timeout, size_t max_bytes,
                                    std::string& rest) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  std::string data;
  std::array<char, 65536> chunk{};
  for (;;) {
    if (const size_t newline = data.find('\n'); newline != std::string::npos) {
      rest = data.substr(newline + 1);
      data.resize(newline);
      return data;
    }
    if (data.size() > max_bytes) throw std::runtime_error("the line is too long");
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) throw std::runtime_error("nothing came in time");
    pollfd p{fd, POLLIN, 0};
    const int ready = ::poll(&p, 1, static_cast<int>(left.count()));
    if (ready < 0 && errno != EINTR)
      throw std::runtime_error(std::string("poll: ") + std::strerror(errno));
    if (ready <= 0) continue;
    const ssize_t n = ::read(fd, chunk.data(), chunk.size());
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n < 0) throw std::runtime_error(std::string("read: ") + std::strerror(errno));
    if (n == 0) throw std::runtime_error("the input ended before the line did");
    data.append(chunk.data(), static_cast<size_t>(n));
  }
}

ControlChannel::ControlChannel(boost::asio::io_context& io, int fd,
                               std::function<void(int)> on_stop, std::function<void()> on_closed)
    : input_(io, fd), on_stop_(std::move(on_stop)), on_closed_(std::move(on_closed)) {}

void ControlChannel::start(std::string already_read) {
  // From the loop, once the agent has started: a stop that came with the preamble must find
  // an agent to stop.
  boost::asio::post(input_.get_executor(),
                    [self = shared_from_this(), early = std::move(already_read)] {
                      self->feed(early);
                      self->read_more();
                    });
}

void ControlChannel::feed(std::string_view data) {
  for (char c : data) {
    if (c != '\n') {
      if (line_.size() < kMaxLine) {
        line_.push_back(c);
      } else {
        skipping_ = true;
      }
      continue;
    }
    if (!skipping_) {
      if (const auto sig = parse_stop(line_); sig && on_stop_) on_stop_(*sig);
    }
    line_.clear();
    skipping_ = false;
  }
}

void ControlChannel::close() {
  boost::system::error_code ignored;
  input_.close(ignored);
}

void ControlChannel::read_more() {
  input_.async_read_some(boost::asio::buffer(buffer_),
                         [self = shared_from_this()](boost::system::error_code ec, size_t n) {
                           if (ec) {
                             if (ec != boost::asio::error::operation_aborted && self->on_closed_)
                               std::exchange(self->on_closed_, nullptr)();
                             return;
                           }
                           self->feed(std::string_view(self->buffer_.data(), n));
                           self->read_more();
                         });
}

}  // namespace npu_run
