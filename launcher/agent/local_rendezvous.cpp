#include "agent/local_rendezvous.hpp"

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>

namespace npu_run {

// The one client of an in-process rendezvous.
constexpr rdzv::ClientId kSelf = 1;

rdzv::NodeInfo this_node(const LaunchConfig& cfg, const std::string& host, const std::string& addr,
                         int worker_port) {
  rdzv::NodeInfo node;
  node.host = host;
  node.addr = addr;
  node.nproc = cfg.nproc_per_node;
  node.devices = cfg.devices;
  node.device_ips = cfg.device_ips;
  node.worker_port = worker_port;
  return node;
}

namespace {

// In-process, this agent is its own server: there is nobody to authenticate.
rdzv::JobSettings untokened(rdzv::JobSettings s) {
  s.token.clear();
  return s;
}

}  // namespace

rdzv::JobSettings job_settings(const LaunchConfig& cfg) {
  rdzv::JobSettings s;
  s.run_id = cfg.run_id;
  s.token = cfg.rdzv_token;
  s.min_nodes = cfg.min_nodes;
  s.max_nodes = cfg.max_nodes;
  s.max_restarts = cfg.max_restarts;
  s.heartbeat_interval = cfg.heartbeat_interval;
  s.heartbeat_timeout = cfg.heartbeat_timeout;
  s.join_timeout = cfg.rdzv_timeout;
  s.last_call = cfg.rdzv_last_call;
  return s;
}

Assignment to_assignment(const rdzv::Assigned& a, const std::string& host) {
  Assignment out;
  out.round = a.round;
  out.restart_count = a.restart_count;
  out.node_rank = a.node_rank;
  out.nnodes = a.nnodes;
  out.world_size = a.world_size;
  out.rank_offset = a.rank_offset;
  out.host = host;
  out.worker_master_addr = a.master_addr;
  out.worker_master_port = a.master_port;
  out.peers = a.peers;
  return out;
}

void deliver_to_agent(const Rendezvous::Handlers& handlers, const rdzv::ServerMessage& message,
                      const std::string& host) {
  std::visit(
      [&](const auto& m) {
        using T = std::decay_t<decltype(m)>;
        if constexpr (std::is_same_v<T, rdzv::Assigned>) {
          handlers.assigned(to_assignment(m, host));
        } else if constexpr (std::is_same_v<T, rdzv::StopWorkers>) {
          handlers.stop_workers(m.root_cause);
        } else if constexpr (std::is_same_v<T, rdzv::Decision>) {
          handlers.decided(m);
        } else if constexpr (std::is_same_v<T, rdzv::Progress>) {
          handlers.progress(m);
        } else if constexpr (std::is_same_v<T, rdzv::ErrorReply>) {
          handlers.failed(m.message);
        }
      },
      message);
}

Assignment planned_assignment(const LaunchConfig& cfg, const std::string& host) {
  // Before a rendezvous nobody knows the other nodes: assume they run as many workers as this
  // one, and take --node-rank (or 0) as this node's rank.
  Assignment a;
  a.node_rank = cfg.node_rank.value_or(0);
  a.nnodes = cfg.max_nodes;
  a.world_size = cfg.nproc_per_node * cfg.max_nodes;
  a.rank_offset = a.node_rank * cfg.nproc_per_node;
  a.host = host;
  a.worker_master_addr = cfg.master_addr;
  return a;
}

LocalRendezvous::LocalRendezvous(boost::asio::io_context& io, const LaunchConfig& cfg,
                                 std::string host, const std::string& hccl_if_base_port)
    : io_(io),
      cfg_(cfg),
      host_(std::move(host)),
      worker_port_(io, ports_to_avoid(hccl_if_base_port, cfg.master_port)),
      state_(untokened(job_settings(cfg)), rdzv::Clock::now()) {}

void LocalRendezvous::start(Handlers handlers) {
  handlers_ = std::move(handlers);
  deliver(state_.on_message(kSelf,
                            rdzv::Hello{rdzv::kMagic, rdzv::kProtocolVersion, cfg_.run_id, ""},
                            rdzv::Clock::now()));
}

void LocalRendezvous::join() {
  rdzv::Join join;
  join.node = this_node(cfg_, host_, cfg_.master_addr, worker_port_.port());
  join.min_nodes = cfg_.min_nodes;
  join.max_nodes = cfg_.max_nodes;
  join.max_restarts = cfg_.max_restarts;
  join.want_peers = cfg_.wants_peers();
  deliver(state_.on_message(kSelf, join, rdzv::Clock::now()));
}

void LocalRendezvous::report(const rdzv::Report& report) {
  deliver(state_.on_message(kSelf, report, rdzv::Clock::now()));
}

void LocalRendezvous::deliver(std::vector<rdzv::Outgoing> outgoing) {
  for (rdzv::Outgoing& o : outgoing) {
    // Posted, never called inline, so the agent sees the same ordering as with a remote server.
    boost::asio::post(io_, [this, message = std::move(o.message)] {
      if (closed_) return;
      deliver_to_agent(handlers_, message, host_);
    });
  }
}

}  // namespace npu_run
