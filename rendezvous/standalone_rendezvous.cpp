#include "npu_run/standalone_rendezvous.hpp"

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>

namespace npu_run {

Assignment standalone_assignment(const LaunchConfig& cfg, const std::string& host,
                                 int worker_port) {
  Assignment a;
  a.node_rank = 0;
  a.nnodes = 1;
  a.world_size = cfg.nproc_per_node;
  a.rank_offset = 0;
  a.host = host;
  a.worker_master_addr = cfg.master_addr;
  a.worker_master_port = worker_port;
  return a;
}

StandaloneRendezvous::StandaloneRendezvous(boost::asio::io_context& io, const LaunchConfig& cfg,
                                           std::string host, const std::string& hccl_if_base_port)
    : io_(io), worker_port_(io, ports_to_avoid(hccl_if_base_port, cfg.master_port)) {
  assignment_ = standalone_assignment(cfg, host, worker_port_.port());
}

void StandaloneRendezvous::async_next_round(AssignedHandler on_assigned) {
  Assignment next = assignment_;
  ++assignment_.round;
  // Posted, not called inline, so the agent sees the same ordering as with a remote server.
  boost::asio::post(io_, [next, on_assigned = std::move(on_assigned)] { on_assigned(next); });
}

}  // namespace npu_run
