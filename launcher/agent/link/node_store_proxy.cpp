#include "agent/link/node_store_proxy.hpp"

#include <spdlog/spdlog.h>

#include <boost/asio/io_context.hpp>

#include "rendezvous/client/server_dialer.hpp"

namespace npu_run {

NodeStoreProxy::NodeStoreProxy(boost::asio::io_context& io, boost::asio::ip::tcp::acceptor& port,
                               std::string root_host, int root_port,
                               std::chrono::milliseconds connect_timeout)
    : io_(io),
      proxy_(io),
      root_host_(std::move(root_host)),
      root_port_(root_port),
      connect_timeout_(connect_timeout) {
  proxy_.listen_for_local_clients(port);
}

NodeStoreProxy::~NodeStoreProxy() {
  if (dialer_) dialer_->cancel();
}

void NodeStoreProxy::new_round() {
  if (dialer_) dialer_->cancel();
  proxy_.reset();
  // Node 0 answered this round on the same port a moment ago: a refusal now means it is gone.
  rdzv::DialPolicy policy;
  policy.refusal_is_final = true;
  dialer_ = rdzv::ServerDialer::create(io_, root_host_, root_port_, connect_timeout_, policy);
  dialer_->start({[this](boost::asio::ip::tcp::socket socket) {
                    spdlog::debug("workers' store proxy: connected to node 0's store at {}",
                                  dialer_->endpoint());
                    // Turned away before node 0 took it: nothing went through; dial again.
                    proxy_.attach_upstream(std::move(socket),
                                           [this](const std::string& why) { dialer_->retry(why); });
                  },
                  [this](const std::string& why) {
                    proxy_.upstream_unreachable(
                        fmt::format("cannot reach node 0's store: {}", why));
                  }});
}

}  // namespace npu_run
