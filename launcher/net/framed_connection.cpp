#include "net/framed_connection.hpp"

#include <fmt/format.h>

#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>

namespace npu_run::net {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;

std::string ConnectionClosed::text() const {
  switch (cause) {
    case Cause::kPeerClosed:
      return "closed by the peer";
    case Cause::kReadError:
    case Cause::kWriteError:
      return error.message();
    case Cause::kQueueFull:
      return fmt::format("it does not read what it is sent ({} bytes waiting)", queued_bytes);
    case Cause::kSent:
      return "closed after the last message";
  }
  return "closed";
}

std::shared_ptr<FramedConnection> FramedConnection::create(tcp::socket socket,
                                                           ConnectionLimits limits) {
  return std::make_shared<FramedConnection>(std::move(socket), limits);
}

FramedConnection::FramedConnection(tcp::socket socket, ConnectionLimits limits)
    : socket_(std::move(socket)),
      limits_(limits),
      buffer_(limits.read_buffer),
      decoder_(limits.max_frame) {
  boost::system::error_code ec;
  const auto remote = socket_.remote_endpoint(ec);
  peer_ = ec ? "unknown peer" : fmt::format("{}:{}", remote.address().to_string(), remote.port());
}

std::string FramedConnection::local_address() const {
  boost::system::error_code ec;
  const auto local = socket_.local_endpoint(ec);
  return ec ? "" : local.address().to_string();
}

void FramedConnection::start(Handlers handlers) {
  handlers_ = std::move(handlers);
  boost::system::error_code ignored;
  socket_.set_option(tcp::no_delay(true), ignored);
  read();
}

void FramedConnection::read() {
  socket_.async_read_some(
      asio::buffer(buffer_), [self = shared_from_this()](boost::system::error_code ec, size_t n) {
        if (self->closed_ || self->closing_) return;
        if (ec) {
          const auto cause = ec == asio::error::eof ? ConnectionClosed::Cause::kPeerClosed
                                                    : ConnectionClosed::Cause::kReadError;
          self->finish({cause, ec}, false);
          return;
        }
        std::vector<std::string> frames;
        const auto error = self->decoder_.feed(std::string_view(self->buffer_.data(), n), frames);
        if (self->handlers_.frames) self->handlers_.frames(frames, error);
        if (!self->closed_ && !self->closing_) self->read();
      });
}

bool FramedConnection::send(std::shared_ptr<const std::string> frame) {
  if (closed_ || closing_) return false;
  if (!queue_.empty() && queued_bytes_ + frame->size() > limits_.max_queued_bytes) {
    finish({ConnectionClosed::Cause::kQueueFull, {}, queued_bytes_}, true);
    return false;
  }
  queued_bytes_ += frame->size();
  queue_.push_back(std::move(frame));
  if (queue_.size() == 1) write();
  return true;
}

void FramedConnection::send_unless_busy(std::shared_ptr<const std::string> frame) {
  if (queue_.empty()) send(std::move(frame));
}

void FramedConnection::write() {
  asio::async_write(socket_, asio::buffer(*queue_.front()),
                    [self = shared_from_this()](boost::system::error_code ec, size_t) {
                      if (self->closed_) return;
                      if (ec) {
                        self->finish({ConnectionClosed::Cause::kWriteError, ec}, false);
                        return;
                      }
                      self->queued_bytes_ -= self->queue_.front()->size();
                      self->queue_.pop_front();
                      if (!self->queue_.empty())
                        self->write();
                      else if (self->closing_)
                        self->finish({ConnectionClosed::Cause::kSent, {}}, false);
                    });
}

void FramedConnection::close_after_sending() {
  if (closed_ || closing_) return;
  closing_ = true;
  if (queue_.empty()) finish({ConnectionClosed::Cause::kSent, {}}, true);
}

void FramedConnection::close() {
  handlers_ = {};
  finish({ConnectionClosed::Cause::kSent, {}}, true);
}

void FramedConnection::finish(const ConnectionClosed& why, bool from_owner) {
  if (closed_) return;
  closed_ = true;
  boost::system::error_code ignored;
  socket_.shutdown(tcp::socket::shutdown_both, ignored);
  socket_.close(ignored);
  queue_.clear();
  queued_bytes_ = 0;
  auto closed = std::move(handlers_.closed);
  handlers_ = {};
  if (!closed) return;
  if (from_owner)
    asio::post(socket_.get_executor(), [closed = std::move(closed), why] { closed(why); });
  else
    closed(why);
}

}  // namespace npu_run::net
