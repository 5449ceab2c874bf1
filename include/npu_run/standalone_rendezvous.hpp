// The rendezvous of a single-node job: no server, every round assigns node 0 of 1. It still holds
// the workers' MASTER_PORT so that restarts reuse a port nobody else can take.
#pragma once

#include <optional>
#include <string>

#include "npu_run/held_port.hpp"
#include "npu_run/launch_config.hpp"
#include "npu_run/rendezvous.hpp"

namespace npu_run {

// The assignment of a single-node job; `worker_port` 0 means "chosen at launch" (dry runs).
Assignment standalone_assignment(const LaunchConfig& cfg, const std::string& host, int worker_port);

class StandaloneRendezvous : public Rendezvous {
 public:
  StandaloneRendezvous(boost::asio::io_context& io, const LaunchConfig& cfg, std::string host,
                       const std::string& hccl_if_base_port);
  void async_next_round(AssignedHandler on_assigned) override;

 private:
  boost::asio::io_context& io_;
  Assignment assignment_;
  HeldPort worker_port_;
};

}  // namespace npu_run
