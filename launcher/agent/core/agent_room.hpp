// The agent's rooms: each feature around this node's state machine (the health gate, the
// timeline, metrics, the progress sockets, the hang watch, ...) lives in a room of its own and
// hears the agent's transitions through this one interface, as torchelastic's event handlers
// do. The agent (agent/local_agent.cpp) keeps the states, the transitions and every decision;
// a room observes, adds what it knows to what the agent sends (the workers' environment, the
// round's end, the report), and hands what it found to RoomHost, where the agent decides.
//
// The events, in the order a round meets them; every room hears each one, in the order the
// rooms were added (agent/rooms/agent_rooms.cpp):
//
//   listen     at the start: the rendezvous' messages the room handles itself (registered in
//              the agent's Inbox, agent/link/rendezvous_inbox.hpp), and what its joins and
//              heartbeats carry (the Handlers' beats and snapshots)
//   joining    INIT or REPORTING -> RENDEZVOUS: a round is joined (the first, after a restart)
//   assigned   this node has a seat in the round (before the job's checks)
//   starting   the round's workers are about to be spawned: their specs, to add to
//   started    -> RUNNING: the workers were spawned
//   done       RUNNING -> REPORTING: the workers are done; what the room knows of their end
//   reporting  the report for the rendezvous, before it is sent
//   decided    the job's decision for the round
//   finishing  -> DONE: the agent ends once every room has called `done`
//
// A room that owns asynchronous work (timers, sockets, tool calls) must be safe when the agent,
// and the room with it, is gone before that work's callback runs.
#pragma once

#include <functional>
#include <memory>
#include <string_view>
#include <vector>

#include "agent/core/attempt.hpp"
#include "agent/link/assignment.hpp"
#include "agent/link/rendezvous.hpp"
#include "agent/link/rendezvous_inbox.hpp"
#include "rendezvous/protocol/messages.hpp"
#include "workers/worker_spec.hpp"

namespace npu_run {

// The agent's states (agent/local_agent.hpp has the table of its transitions).
enum class AgentState { kInit, kRendezvous, kRunning, kReporting, kDone };
std::string_view state_name(AgentState state);

// What the agent offers its rooms: where it is, and the one finding a room hands it to decide.
class RoomHost {
 public:
  virtual ~RoomHost() = default;
  virtual AgentState state() const = 0;
  // This round's attempt once the node has a seat (null before the first).
  virtual const Attempt* attempt() const = 0;
  // A worker of this node hung (agent/round/hang_watch.hpp): the agent decides whether to respond.
  virtual void hung(const Hang& hang) = 0;
};

class AgentRoom {
 public:
  virtual ~AgentRoom() = default;
  virtual void listen(Rendezvous::Handlers& /*handlers*/, Inbox& /*inbox*/) {}
  virtual void joining() {}
  virtual void assigned(const Assignment& /*assignment*/) {}
  virtual void starting(std::vector<WorkerSpec>& /*specs*/) {}
  virtual void started(Attempt& /*attempt*/) {}
  virtual void done(GroupEnd& /*end*/, Attempt& /*attempt*/) {}
  virtual void reporting(rdzv::Report& /*report*/, const GroupEnd& /*end*/) {}
  virtual void decided(const rdzv::Decision& /*decision*/) {}
  // `done` may run later, from the agent's loop; it touches neither the room nor the agent.
  // NOLINTNEXTLINE(performance-unnecessary-value-param): a room may keep it
  virtual void finishing(std::function<void()> done) { done(); }
};

// The agent's rooms, in the order they hear each event. A room may use one added before it:
// they go in the reverse order.
class AgentRooms {
 public:
  AgentRooms() = default;
  ~AgentRooms() {
    while (!rooms_.empty()) rooms_.pop_back();
  }
  AgentRooms(const AgentRooms&) = delete;
  AgentRooms& operator=(const AgentRooms&) = delete;

  void add(std::unique_ptr<AgentRoom> room) { rooms_.push_back(std::move(room)); }

  template <typename Event>
  void each(Event&& event) {
    for (const auto& room : rooms_) event(*room);
  }
  // Every room's finishing(); `then` runs once all of them are done, and may run after the
  // rooms are gone.
  void finishing(std::function<void()> then);

 private:
  std::vector<std::unique_ptr<AgentRoom>> rooms_;
};

}  // namespace npu_run
