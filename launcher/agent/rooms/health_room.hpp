// The health gate's room (--health-check): before every round this node's checks
// (agent/health/health_gate.hpp) run while the rendezvous waits, and their verdict follows the
// join; before a round forms, the device-plane pings the rendezvous asks for; under --log-dir,
// FaultDiag's npu_info files at each attempt's start and end, which the agent's end waits for.
// One room, because all of them call the node's tools through the one gate, a call at a time.
#pragma once

#include <functional>
#include <memory>

#include "agent/rooms/room_context.hpp"
#include "health/verdict.hpp"

namespace npu_run {

// `heard` gets each verdict as it is reached (metrics keep how long the gate took).
std::unique_ptr<AgentRoom> health_room(const RoomContext& ctx,
                                       std::function<void(const NodeVerdict&)> heard);

}  // namespace npu_run
