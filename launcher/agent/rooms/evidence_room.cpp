// The evidence room: what a failure showed beyond its exit (agent/core/failure_evidence.hpp), for
// the rendezvous' restart classification: the root cause's error file, its last beat, whether
// it failed at start, and whether the OOM killer killed a process of this agent's cgroup while
// the attempt ran (its count read when the workers start and again when they are done).
#include "agent/core/failure_evidence.hpp"
#include "agent/core/oom_kills.hpp"
#include "agent/rooms/agent_rooms.hpp"
#include "workers/progress_beats.hpp"

namespace npu_run {
namespace {

class EvidenceRoom final : public AgentRoom {
 public:
  explicit EvidenceRoom(const RoomContext& ctx) : ctx_(ctx) {}

  // Before the workers are spawned: a kill of one of them counts.
  void starting(std::vector<WorkerSpec>& /*specs*/) override {
    oom_kills_before_ = own_oom_kill_count();
  }

  void done(GroupEnd& end, Attempt& attempt) override {
    if (!end.result.root_cause) return;
    const WorkerOutcome& w = end.result.workers[*end.result.root_cause];
    const WorkerError error = read_worker_error(w.error_file);
    end.root_cause_error = error.message;
    const std::optional<uint64_t> oom_kills = own_oom_kill_count();
    const bool oom_killed = oom_kills && oom_kills_before_ && *oom_kills > *oom_kills_before_;
    const ProgressBeats* beats = ctx_.beats;
    const bool has_beats =
        beats != nullptr && w.local_rank >= 0 && w.local_rank < beats->local_ranks();
    end.evidence = failure_evidence(
        EvidenceSources{w, error, has_beats ? beats->rank(w.local_rank).text : std::string(),
                        attempt.started, ctx_.cfg.supervision.startup_window, oom_killed});
  }

 private:
  RoomContext ctx_;
  std::optional<uint64_t> oom_kills_before_;  // the cgroup's OOM kill count at the start
};

}  // namespace

std::unique_ptr<AgentRoom> evidence_room(const RoomContext& ctx) {
  return std::make_unique<EvidenceRoom>(ctx);
}

}  // namespace npu_run
