// The rooms every agent has (agent/core/agent_room.hpp), each in a file named after what it does,
// in the order they hear the agent's events (add_agent_rooms):
//   progress        the beats' sockets and `npu_run status` (the others read the beats)
//   python hooks    --auto-progress, a beat per optimizer step
//   recorder        torch's and torch_npu's flight recorders, dumping per attempt
//   hang            the hang watch and its stack dump (in the round's end before anyone reads it)
//   recorder watch  a recorder's watchdog that dumped itself (after the recorders: their files)
//   records dump    `npu_run status --dump`
//   straggler       --straggler, the entered collectives sampled
//   evidence        what the root cause's failure showed beyond its exit (the hang's, if one)
//   CANN logs       each attempt's plogs, read after a failure (after evidence: a link fault)
//   snapshot        npu_run_checkpoint's snapshots in memory (after the hooks: their path)
//   timeline        this node's part of the job's timeline
//   metrics         --metrics-port
//   health          --health-check's gate and pings (it tells metrics what its verdict took)
//   preflight       --preflight, this node's part of the probe
//   waiting         what the agent says while it waits for a round
#pragma once

#include <memory>

#include "agent/hangs/hang_collection.hpp"
#include "agent/rooms/room_context.hpp"

namespace boost::asio {
class io_context;
}

namespace npu_run {

class ProgressBeats;
struct SnapshotNotes;

// agent/rooms/progress_room.cpp: NPU_RUN_PROGRESS in the workers' environment, the beats of each
// attempt, whether they progressed, and `npu_run status` on this host, with each rank's snapshots
// (`snapshots`).
std::unique_ptr<AgentRoom> progress_room(const RoomContext& ctx,
                                         std::shared_ptr<const SnapshotNotes> snapshots);
// The sockets behind NPU_RUN_PROGRESS, opened once for every round. Without --hang-timeout or
// --exit-timeout a failure costs only the beats (null, with a warning); with them, the job
// cannot do what was asked, so it does not start (a runtime_error naming the option).
std::unique_ptr<ProgressBeats> open_progress_sockets(boost::asio::io_context& io,
                                                     const LaunchConfig& cfg);
// agent/rooms/python_hooks_room.cpp: --auto-progress, a beat per optimizer step in Python workers.
std::unique_ptr<AgentRoom> python_hooks_room(const RoomContext& ctx);
// agent/rooms/recorder_room.cpp: torch's and torch_npu's flight recorders on, dumping per attempt.
std::unique_ptr<AgentRoom> recorder_room(const RoomContext& ctx);
// agent/rooms/recorder_watch_room.cpp: a recorder's watchdog that dumped itself is a hang, found;
// not while the dumps npu_run asked for itself are being written (`asked`).
std::unique_ptr<AgentRoom> recorder_watch_room(const RoomContext& ctx,
                                               std::shared_ptr<const AskedPipeDumps> asked);
// agent/rooms/records_dump_room.cpp: `npu_run status --dump`, this node's ranks' records collected.
std::unique_ptr<AgentRoom> records_dump_room(const RoomContext& ctx,
                                             std::shared_ptr<AskedPipeDumps> asked);
// agent/rooms/hang_room.cpp: each attempt's hang watch and stack dump
// (agent/hangs/hang_response.hpp).
std::unique_ptr<AgentRoom> hang_room(const RoomContext& ctx);
// agent/rooms/straggler_room.cpp: --straggler, this node's ranks' entered collectives sampled.
std::unique_ptr<AgentRoom> straggler_room(const RoomContext& ctx);
// agent/rooms/evidence_room.cpp: what the root cause's failure showed beyond its exit.
std::unique_ptr<AgentRoom> evidence_room(const RoomContext& ctx);
// agent/rooms/cann_log_room.cpp: each attempt's CANN logs in its run directory, read after a
// failure.
std::unique_ptr<AgentRoom> cann_log_room(const RoomContext& ctx);
// agent/rooms/timeline_room.cpp: this node's part of the job's timeline, sent with its report.
std::unique_ptr<AgentRoom> timeline_room(const RoomContext& ctx,
                                         std::shared_ptr<const SnapshotNotes> snapshots);
// agent/rooms/snapshot_room.cpp: npu_run_checkpoint's snapshots in this agent's memory, written to
// storage in the background, restored after a failure.
std::unique_ptr<AgentRoom> snapshot_room(const RoomContext& ctx,
                                         std::shared_ptr<SnapshotNotes> notes);
// agent/rooms/preflight_room.cpp: --preflight, this node's part of the pre-flight probe.
std::unique_ptr<AgentRoom> preflight_room(const RoomContext& ctx);
// agent/rooms/waiting_room.cpp: what the agent says while it waits for a round.
std::unique_ptr<AgentRoom> waiting_room(const RoomContext& ctx);

// Every room, in the order above (the health gate's and metrics' rooms are made here too).
void add_agent_rooms(AgentRooms& rooms, const RoomContext& ctx);

// The variables the rooms above give each worker as an attempt starts, for the agent's private
// directory `agent_directory` (ProgressBeats::directory()); each room calls its own in
// starting(). The dry run calls them all, in the rooms' order (give_rooms_env), with the
// directory's template, so that it shows what a real worker receives.
void give_python_hooks_env(std::vector<WorkerSpec>& specs, const LaunchConfig& cfg,
                           const std::string& agent_directory);
void give_recorder_env(std::vector<WorkerSpec>& specs);
void give_cann_log_env(std::vector<WorkerSpec>& specs);
void give_snapshot_env(std::vector<WorkerSpec>& specs, const std::string& agent_directory);
void give_rooms_env(std::vector<WorkerSpec>& specs, const LaunchConfig& cfg,
                    const EnvMap& agent_env, const std::string& agent_directory);

}  // namespace npu_run
