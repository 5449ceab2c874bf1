// The timeline's room: this node's part of the job's timeline for the round it is in
// (agent/agent_timeline.hpp): its workers spawned, its ranks' beats sampled on a timer while
// they run (agent/beat_sampler.hpp), the root cause's failure and the workers' end, all sent
// with the node's report; the rendezvous keeps the job's.
#include <fmt/format.h>

#include "agent/agent_rooms.hpp"
#include "agent/agent_timeline.hpp"
#include "agent/beat_sampler.hpp"

namespace npu_run {
namespace {

class TimelineRoom final : public AgentRoom {
 public:
  explicit TimelineRoom(const RoomContext& ctx)
      : ctx_(ctx), timeline_(ctx.cfg.shape.nproc_per_node), sampler_(ctx.io) {}

  void assigned(const Assignment& assignment) override {
    timeline_.new_round(assignment.rank_offset);
  }

  void started(Attempt& /*attempt*/) override {
    const int workers = ctx_.cfg.shape.nproc_per_node;
    timeline_.note(rdzv::TimelinePhase::kSpawned, -1,
                   fmt::format("{} worker{}", workers, workers == 1 ? "" : "s"));
    if (ctx_.beats != nullptr) sampler_.start(timeline_, *ctx_.beats);
  }

  void done(GroupEnd& /*end*/, Attempt& /*attempt*/) override { sampler_.stop(); }

  // The round's events go with the report: the root cause's failure and the workers' end too.
  void reporting(rdzv::Report& report, const GroupEnd& end) override {
    const GroupResult& result = end.result;
    if (result.root_cause) {
      const WorkerOutcome& w = result.workers[*result.root_cause];
      const auto at =
          std::chrono::duration_cast<std::chrono::milliseconds>(failed_at(w).time_since_epoch());
      timeline_.note(rdzv::TimelinePhase::kFailed, w.global_rank, w.status.describe(), at.count());
    }
    timeline_.note(rdzv::TimelinePhase::kExited);
    report.timeline = timeline_.take(ctx_.beats);
  }

 private:
  RoomContext ctx_;
  AgentTimeline timeline_;
  BeatSampler sampler_;  // after the timeline it samples into: it stops first
};

}  // namespace

std::unique_ptr<AgentRoom> timeline_room(const RoomContext& ctx) {
  return std::make_unique<TimelineRoom>(ctx);
}

}  // namespace npu_run
