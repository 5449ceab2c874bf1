#include "rendezvous/state/node_order.hpp"

#include <fmt/format.h>

#include <map>

namespace npu_run::rdzv {

const char* node_order_name(NodeOrder order) {
  switch (order) {
    case NodeOrder::kTopology:
      return "topology";
    case NodeOrder::kHost:
      return "host";
    case NodeOrder::kArrival:
      return "arrival";
  }
  return "?";
}

bool seated_before(NodeOrder order, const OrderedNode& a, const OrderedNode& b) {
  if (order == NodeOrder::kTopology) {
    if (topology_less(a.node->topology, b.node->topology)) return true;
    if (topology_less(b.node->topology, a.node->topology)) return false;
  }
  if (order != NodeOrder::kArrival) {
    if (natural_less(a.node->host, b.node->host)) return true;
    if (natural_less(b.node->host, a.node->host)) return false;
  }
  return a.arrival < b.arrival;
}

namespace {

std::string pod_of(const NodeInfo& node) {
  return node.topology.superpod.empty() ? "0" : node.topology.superpod;
}

std::string own_block(const NodeInfo& node) {
  return node.topology.block.empty() ? node.topology.superpod : node.topology.block;
}

// The error for SuperPoD `pod`, whose `nodes` nodes hold `devices` devices, cut at a node
// boundary that no block boundary meets.
std::string cut_error(const std::string& pod, int nodes, int devices, int chips) {
  return fmt::format(
      "--sp-block {}: the {} node{} of SuperPoD {} hold {} devices, which cannot be cut into whole "
      "blocks of {} at node boundaries; give every SuperPoD a multiple of {} devices (add or drop "
      "nodes), or a --sp-block that divides each node's count",
      chips, nodes, nodes == 1 ? "" : "s", pod, devices, chips, chips);
}

}  // namespace

Blocks cut_blocks(const std::vector<const NodeInfo*>& seats, int chips) {
  Blocks blocks;
  if (chips <= 0) {
    for (const NodeInfo* node : seats) blocks.ids.push_back(own_block(*node));
    return blocks;
  }
  std::map<std::string, int> next_block;  // by SuperPoD: one met again (a held seat) goes on
  size_t first = 0;                       // of the current run of one SuperPoD's seats
  while (first < seats.size()) {
    const std::string pod = pod_of(*seats[first]);
    size_t end = first;
    int filled = 0;  // devices in the block being cut
    int& block = next_block[pod];
    int devices = 0;
    bool clean = true;  // every block boundary met a node boundary
    for (; end < seats.size() && pod_of(*seats[end]) == pod; ++end) {
      blocks.ids.push_back(fmt::format("{}-{}", pod, block));
      devices += seats[end]->nproc;
      filled += seats[end]->nproc;
      if (filled > chips) clean = false;
      if (filled >= chips) {
        filled = filled == chips ? 0 : filled;
        block += 1;
      }
    }
    if (!clean || filled != 0) {
      blocks.error = cut_error(pod, static_cast<int>(end - first), devices, chips);
      return blocks;
    }
    first = end;
  }
  return blocks;
}

}  // namespace npu_run::rdzv
