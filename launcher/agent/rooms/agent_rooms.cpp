#include "agent/rooms/agent_rooms.hpp"

#include "agent/plan/worker_plan.hpp"
#include "agent/rooms/health_room.hpp"
#include "agent/rooms/metrics_room.hpp"
#include "agent/snapshots/snapshot_notes.hpp"
#include "basics/enum_table.hpp"

namespace npu_run {
namespace {

constexpr EnumTable<AgentState, 5> kStateNames({{{AgentState::kInit, "INIT"},
                                                 {AgentState::kRendezvous, "RENDEZVOUS"},
                                                 {AgentState::kRunning, "RUNNING"},
                                                 {AgentState::kReporting, "REPORTING"},
                                                 {AgentState::kDone, "DONE"}}});

}  // namespace

std::string_view state_name(AgentState state) {
  return kStateNames.name(state);
}

void AgentRooms::finishing(std::function<void()> then) {
  // Shared by every room's `done`, so that the last one can run `then` after the rooms are gone.
  struct Countdown {
    size_t left;
    std::function<void()> then;
  };
  auto countdown = std::make_shared<Countdown>(Countdown{rooms_.size() + 1, std::move(then)});
  const auto one_done = [countdown] {
    if (--countdown->left == 0 && countdown->then) countdown->then();
  };
  for (const auto& room : rooms_) room->finishing(one_done);
  one_done();  // the rooms' own: none may end the countdown while the loop above still runs
}

void add_agent_rooms(AgentRooms& rooms, const RoomContext& ctx) {
  auto metrics = std::make_unique<MetricsRoom>(ctx);
  MetricsRoom& kept = *metrics;
  auto snapshot_notes = std::make_shared<SnapshotNotes>();
  rooms.add(progress_room(ctx, snapshot_notes));
  rooms.add(python_hooks_room(ctx));
  rooms.add(recorder_room(ctx));
  rooms.add(hang_room(ctx));
  auto asked_dumps = std::make_shared<AskedPipeDumps>();
  rooms.add(recorder_watch_room(ctx, asked_dumps));  // after the recorders' room: it reads their
                                                     // dump files
  rooms.add(records_dump_room(ctx, asked_dumps));
  rooms.add(straggler_room(ctx));
  rooms.add(evidence_room(ctx));
  rooms.add(cann_log_room(ctx));  // after the evidence room: a link fault it finds is evidence
  rooms.add(snapshot_room(
      ctx, snapshot_notes));  // after the Python hooks: it adds its module to their path
  rooms.add(timeline_room(ctx, snapshot_notes));
  rooms.add(std::move(metrics));
  rooms.add(health_room(ctx, [&kept](const NodeVerdict& v) { kept.gate_took(v.elapsed_ms); }));
  rooms.add(preflight_room(ctx));
  rooms.add(waiting_room(ctx));
}

void give_rooms_env(std::vector<WorkerSpec>& specs, const LaunchConfig& cfg,
                    const EnvMap& agent_env, const std::string& agent_directory) {
  add_progress_env(specs, agent_directory, cfg, agent_env);  // progress_room
  give_python_hooks_env(specs, cfg, agent_directory);
  give_recorder_env(specs);
  give_cann_log_env(specs);
  give_snapshot_env(specs, agent_directory);  // after the hooks: it adds to their path
}

}  // namespace npu_run
