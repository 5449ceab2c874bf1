// --worker-store tiered, on one node: this node's workers' store is a proxy (store/store_proxy)
// on the node's held worker port, with one connection to node 0's store on the rendezvous
// port. Each round of the job gets a fresh proxy state and a fresh upstream connection, as node
// 0's store gets a fresh key space.
#pragma once

#include <boost/asio/ip/tcp.hpp>
#include <chrono>
#include <memory>
#include <string>

#include "store/store_proxy.hpp"

namespace boost::asio {
class io_context;
}

namespace npu_run {

namespace rdzv {
class ServerDialer;
}

class NodeStoreProxy {
 public:
  // Serves this host's workers on `port` (bound, and kept by the caller for as long as this
  // lives: the agent's held worker port).
  NodeStoreProxy(boost::asio::io_context& io, boost::asio::ip::tcp::acceptor& port,
                 std::string root_host, int root_port, std::chrono::milliseconds connect_timeout);
  ~NodeStoreProxy();

  // A round formed: drop the last round's connections and connect to node 0's store again.
  // The new round's workers may connect at once; their requests wait for the upstream.
  void new_round();
  const store::StoreProxy& proxy() const { return proxy_; }

 private:
  boost::asio::io_context& io_;
  store::StoreProxy proxy_;
  std::string root_host_;
  int root_port_;
  std::chrono::milliseconds connect_timeout_;
  std::shared_ptr<rdzv::ServerDialer> dialer_;
};

}  // namespace npu_run
