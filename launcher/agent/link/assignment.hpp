// Assignment: what the rendezvous tells one agent about its place in the job. Worker ranks and
// the worker environment are derived from it and the LaunchConfig, nothing else.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "config/launch_config.hpp"
#include "rendezvous/protocol/messages.hpp"

namespace npu_run {

struct Assignment {
  uint64_t round = 0;     // rendezvous round; a restart of the job joins a new round
  int restart_count = 0;  // TORCHELASTIC_RESTART_COUNT, the same on every node
  int node_rank = 0;      // GROUP_RANK
  int nnodes = 1;         // GROUP_WORLD_SIZE
  int world_size = 1;     // WORLD_SIZE: workers in the whole job
  int rank_offset = 0;    // global rank of this node's local rank 0 (prefix sum of nproc)
  std::string host;       // this node's host name, for logs and summaries
  // The workers' store (MASTER_ADDR/MASTER_PORT): with --worker-store agent the rendezvous host
  // on its port (a single node: the agent on a port it holds); with torch, worker rank 0 on a
  // port node 0's agent holds. 0 in a dry-run plan when it is chosen at launch.
  std::string worker_master_addr;
  int worker_master_port = 0;
  std::vector<rdzv::PeerInfo> peers;       // every node, when asked for (rank tables)
  std::string rank_table_file;             // RANK_TABLE_FILE for the workers; empty: none
  std::vector<std::string> probe_notes{};  // --preflight: the probe's figures, before this round
  std::vector<std::string> health_notes;   // the health gate's word to every node, once a round
  // The interface of the address peers use for this node (a multi-node job): what the workers'
  // GLOO_, NCCL_ and HCCL_SOCKET_IFNAME name unless the user set them. Empty: leave them be.
  std::string socket_ifname;
  // The step npu_run_checkpoint.load restores this round, and from where (the same on every node).
  rdzv::RestorePoint restore;
  rdzv::CopyPeer copy_to{};  // the ring's next agent, for copies of the snapshots
  std::string block{};       // --sp-block: HCCL_LOGIC_SUPERPOD_ID of this node's workers
};

// Turns the server's answer into the agent's Assignment.
Assignment to_assignment(const rdzv::Assigned& assigned, const std::string& host);

// What a job would be assigned, before any rendezvous (--dry-run).
Assignment planned_assignment(const LaunchConfig& cfg, const std::string& host);

}  // namespace npu_run
