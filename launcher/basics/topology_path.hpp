// Where a node sits in the network, as its agent found it (agent/health/topology_probe.hpp), and
// the order that puts neighbours on adjacent ranks: the rendezvous seats nodes by it
// (rendezvous/state/node_order.hpp), because ring and tree collectives, and tensor-parallel groups,
// send most of their traffic between adjacent ranks.
#pragma once

#include <string>
#include <vector>

namespace npu_run {

// --node-order: how the rendezvous orders the nodes it seats (rendezvous/state/node_order.hpp).
enum class NodeOrder { kTopology, kHost, kArrival };

struct TopologyPath {
  std::string superpod;               // the physical SuperPoD (Atlas A3); empty elsewhere
  std::string block;                  // the logical SuperPoD (HCCL_LOGIC_SUPERPOD_ID)
  std::vector<std::string> switches;  // from the top (a spine) down to the leaf switch
  std::string server;                 // the server's index in its SuperPoD or rack
  std::vector<std::string> sources;   // what said so: "rank table", "npu-smi", "slurm", ...
  std::vector<int> super_device_ids;  // per local rank (A3's SDID), for rank table 1.2

  bool empty() const {
    return superpod.empty() && block.empty() && switches.empty() && server.empty();
  }
  // The levels compared, from the top: SuperPoD, block, switches, server index.
  std::vector<std::string> levels() const;
  // "superpod 1 / block 1 / switch spine0 > leaf3 / server 4 (npu-smi, lldp)"; "unknown".
  std::string describe() const;
};

// Strings with their digit runs compared as numbers: node2 < node10, leaf-07 == leaf-7 < leaf-8.
// Ties (leaf-07 against leaf-7) fall back to plain string order, so that the order is total.
bool natural_less(const std::string& a, const std::string& b);

// Level by level in natural order; an unknown level comes after a known one, and a path that ends
// first (less is known) after one that goes on, so that nodes of unknown place never split a
// switch's nodes.
bool topology_less(const TopologyPath& a, const TopologyPath& b);

}  // namespace npu_run
