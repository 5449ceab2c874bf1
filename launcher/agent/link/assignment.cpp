#include "agent/link/assignment.hpp"

namespace npu_run {

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
  out.health_notes = a.health_notes;
  out.probe_notes = a.probe_notes;
  out.restore = a.restore;
  out.copy_to = a.copy_to;
  out.block = a.block;
  return out;
}

Assignment planned_assignment(const LaunchConfig& cfg, const std::string& host) {
  // Before a rendezvous nobody knows the other nodes: assume they run as many workers as this
  // one, and take --node-rank (or 0) as this node's rank.
  Assignment a;
  a.node_rank = cfg.shape.node_rank.value_or(0);
  a.nnodes = cfg.shape.max_nodes;
  a.world_size = cfg.shape.nproc_per_node * cfg.shape.max_nodes;
  a.rank_offset = a.node_rank * cfg.shape.nproc_per_node;
  a.host = host;
  a.worker_master_addr = cfg.rendezvous.master_addr;
  // The rendezvous host's store on its port; otherwise a port chosen at launch (tiered: this
  // node's proxy, on this node's address).
  if (cfg.shape.multi_node() && cfg.rendezvous.worker_store == WorkerStore::kAgent)
    a.worker_master_port = cfg.rendezvous.master_port;
  if (cfg.shape.multi_node() && cfg.rendezvous.worker_store == WorkerStore::kTiered)
    a.worker_master_addr = cfg.rendezvous.local_addr.value_or("(this node's address)");
  return a;
}

}  // namespace npu_run
