#include "remote/host_output.hpp"

#include <boost/asio/error.hpp>

#include "workers/console.hpp"

namespace npu_run {

HostOutput::HostOutput(boost::asio::io_context& io, int fd, ConsoleStream& console,
                       ControlHandler control, std::function<void()> on_end)
    : io_(io),
      pipe_(io, fd),
      console_(console),
      on_control_(std::move(control)),
      on_end_(std::move(on_end)),
      pending_timer_(io) {}

void HostOutput::start() {
  read_more();
}

void HostOutput::release() {
  holding_ = false;
  std::string held;
  held.swap(held_);
  show(held);
  if (ended_) {
    flush_pending();
    if (!held.empty() && held.back() != '\n') console_.end_line(this);
  }
}

void HostOutput::close() {
  boost::system::error_code ignored;
  pipe_.close(ignored);
  pending_timer_.cancel();
}

void HostOutput::read_more() {
  pipe_.async_read_some(boost::asio::buffer(buffer_),
                        [self = shared_from_this()](boost::system::error_code ec, size_t n) {
                          if (ec) {
                            self->ended_ = true;
                            if (self->in_control_) {  // a cut control line is text
                              self->in_control_ = false;
                              self->show(self->control_line_);
                            }
                            if (!self->at_line_start_ && !self->holding_)
                              self->console_.end_line(self.get());
                            if (self->on_end_) std::exchange(self->on_end_, nullptr)();
                            return;
                          }
                          self->feed(std::string_view(self->buffer_.data(), n));
                          if (self->console_.has_room()) {
                            self->read_more();
                          } else {
                            self->console_.when_room(self->io_, [self] { self->read_more(); });
                          }
                        });
}

void HostOutput::feed(std::string_view data) {
  while (!data.empty()) {
    if (in_control_) {
      const size_t newline = data.find('\n');
      control_line_.append(data.substr(0, newline));
      if (newline == std::string_view::npos) {
        if (control_line_.size() > kMaxControlLine) {  // not a control line after all
          in_control_ = false;
          at_line_start_ = false;
          show(control_line_);
        }
        return;
      }
      data.remove_prefix(newline + 1);
      end_control_line();
      continue;
    }
    if (at_line_start_ && data.front() == kControlMark) {
      in_control_ = true;
      control_line_.clear();
      continue;
    }
    const size_t newline = data.find('\n');
    const size_t end = newline == std::string_view::npos ? data.size() : newline + 1;
    show(data.substr(0, end));
    at_line_start_ = newline != std::string_view::npos;
    data.remove_prefix(end);
  }
}

void HostOutput::end_control_line() {
  in_control_ = false;
  at_line_start_ = true;
  if (const auto line = parse_control(control_line_)) {
    if (on_control_) on_control_(*line);
    return;
  }
  show(control_line_ + "\n");  // a line that only looked like one
}

void HostOutput::show(std::string_view text) {
  if (text.empty()) return;
  if (holding_) {
    held_.append(text);
    if (held_.size() > kMaxHeld) held_.erase(0, held_.size() - kMaxHeld);
    return;
  }
  pending_.append(text);
  const size_t cut = pending_.find_last_of("\r\n");
  if (cut != std::string::npos) {
    console_.write(this, std::string_view(pending_).substr(0, cut + 1), pending_[cut] != '\n');
    pending_.erase(0, cut + 1);
  }
  if (pending_.size() > kMaxPending) {
    flush_pending();
  } else if (!pending_.empty() && !timer_armed_) {
    timer_armed_ = true;
    pending_timer_.expires_after(kLineWait);
    pending_timer_.async_wait([self = shared_from_this()](boost::system::error_code ec) {
      self->timer_armed_ = false;
      if (!ec) self->flush_pending();
    });
  }
}

void HostOutput::flush_pending() {
  if (pending_.empty()) return;
  console_.write(this, pending_, true);
  pending_.clear();
}

}  // namespace npu_run
