// Where this node sits in the network (basics/topology_path.hpp), found once when the agent
// starts, before its first join, which carries it to the rendezvous
// (rendezvous/state/node_order.hpp). The sources, each filling what the ones before it left
// unknown:
//   --topology FILE        the whole path of a node it lists (an administrator's word)
//   a given rank table     its SuperPoD (1.2's super_pod_list) and the server's place in it
//   HCCL_LOGIC_SUPERPOD_ID the logical SuperPoD (block)
//   npu-smi                `info -t spod-info` of the first device: SuperPoD, server index; with
//                          --rank-table auto on a SuperPoD, every device's SDID (rank table 1.2)
//   Slurm                  SLURM_TOPOLOGY_ADDR with its pattern: the switches
//   hccn_tool              `-i N -lldp -g` of the first device: the leaf switch its port is cabled
//                          to (on rail-optimized networks every plane's leaf follows plane 0's)
// The tools run side by side on a loop of their own, each call under kTopologyCallTimeout (or
// --health-timeout's shorter call timeout): a tool that hangs costs that once, and its part
// stays unknown. A multi-node job only.
#pragma once

#include <chrono>
#include <string>

#include "basics/environment.hpp"
#include "basics/topology_path.hpp"
#include "config/launch_config.hpp"

namespace npu_run {

inline constexpr std::chrono::milliseconds kTopologyCallTimeout{5'000};

TopologyPath find_topology(const LaunchConfig& cfg, const EnvMap& env, const std::string& host);

}  // namespace npu_run
