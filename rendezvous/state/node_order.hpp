// The order of a round's free seats (rendezvous/state/state_spares.cpp) and the logical SuperPoD
// blocks cut from it: pure functions of what the joiners said of themselves.
//
// --node-order topology (the default): by each node's topology path (basics/topology_path.hpp):
// SuperPoD, logical SuperPoD block, switches, server index; then by host name in natural order
// (node2 before node10), then by arrival. `host`: host name and arrival only. `arrival`: the order
// the joins came in. Seats held from an earlier round and explicit --node-ranks are not free, and
// never move.
//
// --sp-block CHIPS (Atlas A3, as MindCluster's sp-block): HCCL's logical SuperPoDs, cut here so
// that each is a run of adjacent ranks inside one physical SuperPoD, CHIPS devices each. A job
// whose nodes cannot be cut into whole blocks is refused, naming the block size and the count.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "basics/topology_path.hpp"
#include "rendezvous/protocol/message_parts.hpp"

namespace npu_run::rdzv {

// "topology", "host", "arrival".
const char* node_order_name(NodeOrder order);

// One free joiner, as the order sees it.
struct OrderedNode {
  const NodeInfo* node;
  uint64_t arrival;
};

// Whether `a` takes a seat before `b`.
bool seated_before(NodeOrder order, const OrderedNode& a, const OrderedNode& b);

struct Blocks {
  std::vector<std::string> ids;  // by seat: the block's id, HCCL_LOGIC_SUPERPOD_ID's value
  std::string error;             // non-empty: the nodes cannot be cut so
};

// Cuts the seats (in node-rank order) into blocks of `chips` devices: "<superpod>-<k>", k from 0
// in each SuperPoD. Without --sp-block (`chips` 0), each node's own block or SuperPoD.
Blocks cut_blocks(const std::vector<const NodeInfo*>& seats, int chips);

}  // namespace npu_run::rdzv
