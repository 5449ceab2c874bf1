// What the agent hands every room it makes (agent/rooms/agent_rooms.hpp): the loop, the launch's
// configuration, the rendezvous, the node's facts, the host the rooms report to, and the
// progress sockets. A header of its own, so that a room's header needs only this and
// agent/core/agent_room.hpp, never the list of every room.
#pragma once

#include "agent/core/agent_context.hpp"
#include "agent/core/agent_room.hpp"
#include "config/launch_config.hpp"

namespace boost::asio {
class io_context;
}

namespace npu_run {

class ProgressBeats;

// What every room may use; each outlives the rooms.
struct RoomContext {
  boost::asio::io_context& io;
  const LaunchConfig& cfg;
  Rendezvous& rendezvous;
  const AgentContext& agent;
  RoomHost& host;
  ProgressBeats* beats;  // NPU_RUN_PROGRESS; null when it could not be made
};

}  // namespace npu_run
