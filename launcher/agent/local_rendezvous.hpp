// The rendezvous of a single-node job: RendezvousState in-process, no server and no socket. The
// restart and exit decisions are thus made by the same code as in a multi-node job. It holds
// the workers' MASTER_PORT so that restarts reuse a port nobody else can take.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "agent/rendezvous.hpp"
#include "basics/port_range.hpp"
#include "config/launch_config.hpp"
#include "net/held_port.hpp"
#include "rendezvous/state.hpp"
#include "store/store_server.hpp"

namespace npu_run {

class LocalRendezvous : public Rendezvous {
 public:
  // `avoid`: ports the workers' MASTER_PORT must not be (HCCL's, the rendezvous port).
  LocalRendezvous(boost::asio::io_context& io, const LaunchConfig& cfg, std::string host,
                  const std::vector<PortRange>& avoid);
  void start(Handlers handlers) override;
  void join() override;
  void report(const rdzv::Report& report) override;
  void query_status(std::function<void(StatusAnswer)> done) override;
  void close() override { closed_ = true; }
  std::string describe() const override { return "in-process"; }

 private:
  void deliver(std::vector<rdzv::Outgoing> outgoing);

  boost::asio::io_context& io_;
  const LaunchConfig& cfg_;
  std::string host_;
  net::HeldPort worker_port_;
  // --worker-store agent: the workers' store, served to this host on --master-port when the
  // user chose one (tcp://ADDR:PORT in scripts), else on the held port.
  std::vector<std::unique_ptr<boost::asio::ip::tcp::acceptor>> store_ports_;
  std::unique_ptr<store::StoreServer> store_;
  int store_port() const;
  rdzv::RendezvousState state_;
  Handlers handlers_;
  bool closed_ = false;
};

}  // namespace npu_run
