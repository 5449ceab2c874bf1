// The rendezvous of a multi-node job, seen from one agent: a RendezvousClient to the server on
// --master-addr:--master-port. It holds a worker port in case this node becomes node 0, and
// gives up on a round that does not form within --rdzv-timeout.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "agent/node_store_proxy.hpp"
#include "agent/rendezvous.hpp"
#include "basics/port_range.hpp"
#include "config/launch_config.hpp"
#include "net/held_port.hpp"
#include "rendezvous/client.hpp"

namespace npu_run {

class TcpRendezvous : public Rendezvous {
 public:
  // `avoid`: ports the workers' MASTER_PORT must not be (HCCL's, the rendezvous port).
  TcpRendezvous(boost::asio::io_context& io, const LaunchConfig& cfg, std::string host,
                const std::vector<PortRange>& avoid);
  ~TcpRendezvous() override;

  void start(Handlers handlers) override;
  void join() override;
  void report(const rdzv::Report& report) override;
  void notice_hang(const rdzv::HangNotice& notice) override;
  void query_status(std::function<void(StatusAnswer)> done) override;
  void close() override;
  std::string describe() const override;

 private:
  void send_join();
  void on_message(const rdzv::ServerMessage& message);

  boost::asio::io_context& io_;
  const LaunchConfig& cfg_;
  std::string host_;
  std::string addr_;  // what peers use to reach this node
  net::HeldPort worker_port_;
  std::unique_ptr<NodeStoreProxy> proxy_;  // --worker-store tiered
  rdzv::RendezvousClient client_;
  struct JoinDeadline;  // a steady_timer; Asio stays out of this header
  std::unique_ptr<JoinDeadline> join_deadline_;
  Handlers handlers_;
  bool connected_ = false;
  bool join_wanted_ = false;
  // Status queries sent on the session, by id (an answer lost with a connection the session
  // moved from never comes: the asker's own timeout covers it); failed all at once if it ends.
  std::map<uint64_t, std::function<void(StatusAnswer)>> status_waiting_;
  uint64_t next_status_query_ = 1;
  void fail_status_queries(const std::string& why);
};

}  // namespace npu_run
