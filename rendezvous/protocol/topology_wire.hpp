// A node's place in the network on the wire (NodeInfo::topology): only what is known is sent,
// and a peer's is bounded (Limits::kMaxTopologyLevels levels and sources, kMaxName each).
#pragma once

#include <nlohmann/json.hpp>

#include "basics/topology_path.hpp"

namespace npu_run::rdzv {

nlohmann::json to_json(const TopologyPath& t);
// Throws BadMessage (rendezvous/protocol/json_fields.hpp) naming what is wrong.
TopologyPath topology_from(const nlohmann::json& j);

}  // namespace npu_run::rdzv
