// The progress sockets' room: every worker gets its NPU_RUN_PROGRESS (workers/progress_beats.hpp,
// opened by the agent); each attempt's beats start afresh and are collected to the last when its
// workers are done, which says whether the job progressed (agent/records/progress_record.hpp); and
// `npu_run status` on this host is answered with this node's beats as of now
// (agent/records/status_service.hpp), which the heartbeats carry to the rendezvous when they
// changed.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <stdexcept>

#include "agent/plan/worker_plan.hpp"
#include "agent/records/progress_record.hpp"
#include "agent/records/status_service.hpp"
#include "agent/rooms/agent_rooms.hpp"
#include "workers/progress_beats.hpp"

namespace npu_run {
namespace {

class ProgressRoom final : public AgentRoom {
 public:
  ProgressRoom(const RoomContext& ctx, std::shared_ptr<const SnapshotNotes> snapshots) : ctx_(ctx) {
    if (ctx.beats == nullptr) return;
    status_ = std::make_unique<StatusService>(
        ctx.io, ctx.rendezvous, *ctx.beats,
        [&host = ctx.host]() -> std::optional<Seat> {
          const AgentState state = host.state();
          if (state != AgentState::kRunning && state != AgentState::kReporting) return std::nullopt;
          const Attempt* attempt = host.attempt();
          return Seat{attempt->assignment.node_rank, attempt->assignment.host};
        },
        std::move(snapshots));
  }

  void listen(Rendezvous::Handlers& handlers, Inbox& /*inbox*/) override {
    handlers.beats = [this] { return status_ ? status_->changed_beats() : std::nullopt; };
  }

  void starting(std::vector<WorkerSpec>& specs) override {
    add_progress_env(specs, ctx_.beats != nullptr ? ctx_.beats->directory() : std::string(),
                     ctx_.cfg, ctx_.agent.agent_env);
  }

  void started(Attempt& /*attempt*/) override {
    if (ctx_.beats != nullptr) ctx_.beats->new_attempt();
  }

  void done(GroupEnd& end, Attempt& attempt) override {
    if (ctx_.beats != nullptr) ctx_.beats->collect_now();
    ProgressRecord::log(ctx_.beats, attempt.assignment.restart_count);
    end.progressed = record_.progressed(ctx_.beats);
  }

 private:
  using Seat = StatusService::Seat;

  RoomContext ctx_;
  std::unique_ptr<StatusService> status_;  // with the beats
  ProgressRecord record_;                  // over the attempts so far
};

}  // namespace

std::unique_ptr<ProgressBeats> open_progress_sockets(boost::asio::io_context& io,
                                                     const LaunchConfig& cfg) {
  try {
    return std::make_unique<ProgressBeats>(io, cfg.shape.nproc_per_node);
  } catch (const std::exception& e) {
    if (cfg.supervision.hang.any())
      throw std::runtime_error(fmt::format("--hang-timeout/--exit-timeout: {}", e.what()));
    spdlog::warn("{}; workers get no NPU_RUN_PROGRESS", e.what());
    return nullptr;
  }
}

std::unique_ptr<AgentRoom> progress_room(const RoomContext& ctx,
                                         std::shared_ptr<const SnapshotNotes> snapshots) {
  return std::make_unique<ProgressRoom>(ctx, std::move(snapshots));
}

}  // namespace npu_run
