#include "store/local_clients.hpp"

#include <fmt/format.h>

#include <stdexcept>

#include "net/stream_connection.hpp"

namespace npu_run::store {

std::shared_ptr<net::AcceptLoop> accept_local_clients(
    boost::asio::ip::tcp::acceptor& acceptor, const std::string& what,
    std::function<void(boost::asio::ip::tcp::socket)> serve,
    std::function<void(const std::string& peer)> refused) {
  boost::system::error_code ec;
  acceptor.listen(boost::asio::socket_base::max_listen_connections, ec);
  if (ec) throw std::runtime_error(fmt::format("{}: listen: {}", what, ec.message()));
  return net::AcceptLoop::start(
      acceptor, what,
      [serve = std::move(serve),
       refused = std::move(refused)](boost::asio::ip::tcp::socket socket) {
        boost::system::error_code peer_ec;
        const auto local = net::unmapped(socket.local_endpoint(peer_ec).address());
        const auto peer = net::unmapped(socket.remote_endpoint(peer_ec).address());
        if (peer_ec || (!peer.is_loopback() && peer != local)) {
          refused(peer_ec ? "a peer" : peer.to_string());
          return;  // the socket closes here
        }
        serve(std::move(socket));
      });
}

}  // namespace npu_run::store
