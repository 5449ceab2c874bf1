// Assignment: what the rendezvous tells one agent about its place in the job. Worker ranks and
// the worker environment are derived from it and the LaunchConfig, nothing else.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "rendezvous/messages.hpp"

namespace npu_run {

struct Assignment {
  uint64_t round = 0;     // rendezvous round; a restart of the job joins a new round
  int restart_count = 0;  // TORCHELASTIC_RESTART_COUNT, the same on every node
  int node_rank = 0;      // GROUP_RANK
  int nnodes = 1;         // GROUP_WORLD_SIZE
  int world_size = 1;     // WORLD_SIZE: workers in the whole job
  int rank_offset = 0;    // global rank of this node's local rank 0 (prefix sum of nproc)
  std::string host;       // this node's host name, for logs and summaries
  // Where worker rank 0 hosts torch's store (MASTER_ADDR/MASTER_PORT): node 0's address and a
  // port its agent holds. 0 in a dry-run plan (chosen at launch).
  std::string worker_master_addr;
  int worker_master_port = 0;
  std::vector<rdzv::PeerInfo> peers;  // every node, when asked for (rank tables)
  std::string rank_table_file;        // RANK_TABLE_FILE for the workers; empty: none
};

}  // namespace npu_run
