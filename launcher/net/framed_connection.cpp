#include "net/framed_connection.hpp"

namespace npu_run::net {

std::shared_ptr<FramedConnection> FramedConnection::create(boost::asio::ip::tcp::socket socket,
                                                           ConnectionLimits limits) {
  return std::make_shared<FramedConnection>(std::move(socket), limits);
}

FramedConnection::FramedConnection(boost::asio::ip::tcp::socket socket, ConnectionLimits limits)
    : StreamConnection(std::move(socket), limits), decoder_(limits.max_frame) {}

void FramedConnection::start(Handlers handlers) {
  handlers_ = std::move(handlers);
  // A read holds the connection alive while its bytes are delivered, so `this` is valid there.
  start_stream({[this](std::string_view bytes) { on_bytes(bytes); }, handlers_.closed});
}

void FramedConnection::on_bytes(std::string_view bytes) {
  // While a `foreign` handler is set, the protocol is not yet known.
  if (handlers_.foreign) {
    first_bytes_.append(bytes);
    const FirstBytes kind = classify_first_bytes(first_bytes_);
    if (kind == FirstBytes::kUndecided) return;
    auto foreign = std::move(handlers_.foreign);
    handlers_.foreign = nullptr;
    if (kind == FirstBytes::kForeign) {
      handlers_ = {};
      foreign(std::move(first_bytes_));
      return;
    }
    bytes = first_bytes_;
  }
  std::vector<std::string> frames;
  const auto error = decoder_.feed(bytes, frames);
  first_bytes_ = std::string();
  if (handlers_.frames) handlers_.frames(frames, error);
}

}  // namespace npu_run::net
