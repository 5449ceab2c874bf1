#include "net/stream_connection.hpp"

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

std::shared_ptr<StreamConnection> StreamConnection::create(tcp::socket socket,
                                                           ConnectionLimits limits) {
  return std::make_shared<StreamConnection>(std::move(socket), limits);
}

StreamConnection::StreamConnection(tcp::socket socket, ConnectionLimits limits)
    : limits_(limits), socket_(std::move(socket)), buffer_(limits.read_buffer) {
  boost::system::error_code ec;
  const auto remote = socket_.remote_endpoint(ec);
  peer_ = ec ? "unknown peer" : fmt::format("{}:{}", remote.address().to_string(), remote.port());
}

asio::ip::address unmapped(const asio::ip::address& address) {
  if (address.is_v6() && address.to_v6().is_v4_mapped())
    return asio::ip::make_address_v4(asio::ip::v4_mapped, address.to_v6());
  return address;
}

asio::ip::address StreamConnection::peer_address() const {
  boost::system::error_code ec;
  const auto remote = socket_.remote_endpoint(ec);
  return ec ? asio::ip::address() : unmapped(remote.address());
}

std::string StreamConnection::local_address() const {
  boost::system::error_code ec;
  const auto local = socket_.local_endpoint(ec);
  return ec ? "" : unmapped(local.address()).to_string();
}

void StreamConnection::start_stream(StreamHandlers handlers) {
  stream_handlers_ = std::move(handlers);
  boost::system::error_code ignored;
  socket_.set_option(tcp::no_delay(true), ignored);
  read();
}

void StreamConnection::read() {
  socket_.async_read_some(
      asio::buffer(buffer_), [self = shared_from_this()](boost::system::error_code ec, size_t n) {
        if (self->closed_ || self->closing_) return;
        if (ec) {
          const auto cause = ec == asio::error::eof ? ConnectionClosed::Cause::kPeerClosed
                                                    : ConnectionClosed::Cause::kReadError;
          self->finish({cause, ec}, false);
          return;
        }
        self->bytes_received_ += n;
        // A copy: the handler may hand the connection to another owner, replacing this one.
        const auto received = self->stream_handlers_.received;
        if (received) received(std::string_view(self->buffer_.data(), n));
        if (!self->closed_ && !self->closing_) self->read();
      });
}

bool StreamConnection::send(std::shared_ptr<const std::string> bytes) {
  if (closed_ || closing_) return false;
  if (!queue_.empty() && queued_bytes_ + bytes->size() > limits_.max_queued_bytes) {
    finish({ConnectionClosed::Cause::kQueueFull, {}, queued_bytes_}, true);
    return false;
  }
  queued_bytes_ += bytes->size();
  queue_.push_back(std::move(bytes));
  if (queue_.size() == 1) write();
  return true;
}

void StreamConnection::send_unless_busy(std::shared_ptr<const std::string> bytes) {
  if (queue_.empty()) send(std::move(bytes));
}

void StreamConnection::write() {
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

void StreamConnection::close_after_sending() {
  if (closed_ || closing_) return;
  closing_ = true;
  if (queue_.empty()) finish({ConnectionClosed::Cause::kSent, {}}, true);
}

void StreamConnection::close() {
  stream_handlers_ = {};
  finish({ConnectionClosed::Cause::kSent, {}}, true);
}

void StreamConnection::finish(const ConnectionClosed& why, bool from_owner) {
  if (closed_) return;
  closed_ = true;
  boost::system::error_code ignored;
  socket_.shutdown(tcp::socket::shutdown_both, ignored);
  socket_.close(ignored);
  queue_.clear();
  queued_bytes_ = 0;
  auto closed = std::move(stream_handlers_.closed);
  stream_handlers_ = {};
  if (!closed) return;
  if (from_owner)
    asio::post(socket_.get_executor(), [closed = std::move(closed), why] { closed(why); });
  else
    closed(why);
}

}  // namespace npu_run::net
