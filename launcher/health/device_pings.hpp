// The device plane's reachability check: once every node's device addresses are known (their
// `hccn_tool -ip -g` answers), each device pings the same-index device of the next node in a
// ring, and for larger jobs one device per node also pings the same-index device of the node
// half (and a quarter) of the job away, a different device per node and chord, so that a switch
// that cuts a group of nodes off shows without every device pinging every node (at most
// kMaxPingsPerDevice per device; a node's pings: one per device, plus one per chord).
// Same index only: on rail-optimised RoCE networks device i of one server talks to device i of
// the others, and pairs of one server (the two dies of an A3 card among them) never ping each
// other: HCCL reaches those over the board, not the network. Pure: the rendezvous plans and
// judges, the agents run the pings (`hccn_tool -i N -ping -g address IP`).
#pragma once

#include <string>
#include <vector>

#include "health/verdict.hpp"

namespace npu_run {

inline constexpr size_t kMaxPingsPerDevice = 3;

// One ping a node makes: from its device, to a device of another node.
struct DevicePing {
  int device = -1;      // this node's physical device id
  std::string ip;       // the address pinged
  std::string peer;     // "node 4 (host-d)", for messages
  int peer_device = -1;
};

// A node as the plan sees it: its name and its devices' addresses in local-rank order.
struct PingNode {
  std::string label;
  std::vector<DeviceIp> devices;
};

// The pings each node makes, by the nodes' index in `nodes` (the ring's order). Nothing for
// fewer than two nodes; a device without an address on either end is left out.
std::vector<std::vector<DevicePing>> plan_device_pings(const std::vector<PingNode>& nodes);

// What the answers mean for each node, by index: every unreached pair is named on both of its
// nodes ("node 3 (host-c) device 5 (10.0.3.5) cannot reach node 4 (host-d) device 5
// (10.0.4.5): recv time out"). A pair's failure is blamed on the node that is in the most
// unreached pairs (the broken end of a ring shows up on both of its sides); the node at its
// other end is warned. Where that cannot tell them apart (two nodes, or equal counts), both
// fail. A ping that did not answer is "not run" on the node that made it, blaming nobody.
// `results[i]` are node i's answers to `plans[i]`.
std::vector<std::vector<HealthFinding>> judge_device_pings(
    const std::vector<PingNode>& nodes, const std::vector<std::vector<DevicePing>>& plans,
    const std::vector<std::vector<PingResult>>& results);

}  // namespace npu_run
