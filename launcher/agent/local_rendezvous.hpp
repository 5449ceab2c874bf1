// The rendezvous of a single-node job: RendezvousState in-process, no server and no socket. The
// restart and exit decisions are thus made by the same code as in a multi-node job. It holds
// the workers' MASTER_PORT so that restarts reuse a port nobody else can take.
#pragma once

#include <memory>
#include <string>

#include "agent/rendezvous.hpp"
#include "config/launch_config.hpp"
#include "net/held_port.hpp"
#include "rendezvous/state.hpp"

namespace npu_run {

// This node as the rendezvous sees it.
rdzv::NodeInfo this_node(const LaunchConfig& cfg, const std::string& host, const std::string& addr,
                         int worker_port);

// The job settings that a LaunchConfig implies for the rendezvous state machine.
rdzv::JobSettings job_settings(const LaunchConfig& cfg);

// What a single-node job would be assigned, without holding a port (--dry-run).
Assignment planned_assignment(const LaunchConfig& cfg, const std::string& host);

class LocalRendezvous : public Rendezvous {
 public:
  LocalRendezvous(boost::asio::io_context& io, const LaunchConfig& cfg, std::string host,
                  const std::string& hccl_if_base_port);
  void start(Handlers handlers) override;
  void join() override;
  void report(const rdzv::Report& report) override;
  void close() override { closed_ = true; }
  std::string describe() const override { return "in-process"; }

 private:
  void deliver(std::vector<rdzv::Outgoing> outgoing);

  boost::asio::io_context& io_;
  const LaunchConfig& cfg_;
  std::string host_;
  HeldPort worker_port_;
  rdzv::RendezvousState state_;
  Handlers handlers_;
  bool closed_ = false;
};

// Turns the server's answer into the agent's Assignment.
Assignment to_assignment(const rdzv::Assigned& assigned, const std::string& host);

// Hands one message from the rendezvous to the agent's handler for it. Welcome and heartbeat
// acknowledgements are for the connection, not the agent, and are dropped.
void deliver_to_agent(const Rendezvous::Handlers& handlers, const rdzv::ServerMessage& message,
                      const std::string& host);

}  // namespace npu_run
