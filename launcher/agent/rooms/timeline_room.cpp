// The timeline's room: this node's part of the job's timeline for the round it is in
// (agent/records/agent_timeline.hpp): its workers spawned, its ranks' beats sampled on a timer
// while they run (agent/records/beat_sampler.hpp), the root cause's failure and the workers' end,
// all sent with the node's report; the rendezvous keeps the job's.
#include <fmt/format.h>

#include "agent/records/agent_timeline.hpp"
#include "agent/records/beat_sampler.hpp"
#include "agent/rooms/agent_rooms.hpp"
#include "agent/snapshots/snapshot_notes.hpp"

namespace npu_run {
namespace {

// Ranks whose records a round's events name, at most.
constexpr size_t kMaxRecordEvents = 8;

// "/logs/job/attempt_0/2/stacks.txt, fr_trace.json": the directory once, within kMaxDetail.
std::string files_text(const std::vector<std::string>& files) {
  std::string text;
  std::string directory;
  for (const std::string& file : files) {
    const size_t slash = file.rfind('/');
    const std::string dir = slash == std::string::npos ? "" : file.substr(0, slash + 1);
    const std::string item = dir == directory ? file.substr(dir.size()) : file;
    directory = dir;
    text += (text.empty() ? "" : ", ") + item;
  }
  return text.size() <= rdzv::kMaxDetail ? text : text.substr(0, rdzv::kMaxDetail - 3) + "...";
}

class TimelineRoom final : public AgentRoom {
 public:
  TimelineRoom(const RoomContext& ctx, std::shared_ptr<const SnapshotNotes> snapshots)
      : ctx_(ctx),
        snapshots_(std::move(snapshots)),
        timeline_(ctx.cfg.shape.nproc_per_node),
        sampler_(ctx.io) {}

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
    // Where a hang's dump kept the ranks' records, the root cause's first: the report lists
    // them under the root cause (a few ranks' worth: the node's events are few).
    std::vector<const WorkerOutcome*> kept;
    if (result.root_cause) kept.push_back(&result.workers[*result.root_cause]);
    for (const WorkerOutcome& w : result.workers)
      if (kept.empty() || &w != kept.front()) kept.push_back(&w);
    size_t noted = 0;
    for (const WorkerOutcome* w : kept) {
      if (w->record_files.empty() || noted++ == kMaxRecordEvents) continue;
      timeline_.note(rdzv::TimelinePhase::kRecords, w->global_rank, files_text(w->record_files));
    }
    if (const auto& r = snapshots_->restored)
      timeline_.note(rdzv::TimelinePhase::kRestore, -1, r->detail, r->time_ms, r->step);
    timeline_.note(rdzv::TimelinePhase::kExited);
    report.timeline = timeline_.take(ctx_.beats);
  }

 private:
  RoomContext ctx_;
  std::shared_ptr<const SnapshotNotes> snapshots_;  // the round's restore
  AgentTimeline timeline_;
  BeatSampler sampler_;  // after the timeline it samples into: it stops first
};

}  // namespace

std::unique_ptr<AgentRoom> timeline_room(const RoomContext& ctx,
                                         std::shared_ptr<const SnapshotNotes> snapshots) {
  return std::make_unique<TimelineRoom>(ctx, std::move(snapshots));
}

}  // namespace npu_run
