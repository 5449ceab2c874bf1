// A store's own listener: torch's store protocol has no authentication, so a store that serves
// one host's workers (a single node's store, a node's proxy) accepts connections from that
// host only: from a loopback address, or from an address of the host itself.
#pragma once

#include <boost/asio/ip/tcp.hpp>
#include <functional>
#include <memory>
#include <string>

#include "net/accept_loop.hpp"

namespace npu_run::store {

// Listens on `acceptor` (bound; kept open by its owner while the loop runs) and hands this
// host's connections to `serve`; a connection from anywhere else is closed after `refused`
// was told its peer. `what` names the listener in messages.
std::shared_ptr<net::AcceptLoop> accept_local_clients(
    boost::asio::ip::tcp::acceptor& acceptor, const std::string& what,
    std::function<void(boost::asio::ip::tcp::socket)> serve,
    std::function<void(const std::string& peer)> refused);

}  // namespace npu_run::store
