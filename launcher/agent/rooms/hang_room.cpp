// The hang watch's room (--hang-timeout, --exit-timeout): each attempt gets its HangResponse
// (agent/hangs/hang_response.hpp) once its workers run, with where each rank serves its records; a
// hang it finds goes to the agent, which decides whether to respond. When the workers are done, the
// dump goes into the round's end: the hung rank as root cause, each rank's last beat and frames,
// the stacks for the job's blame.
#include "agent/hangs/hang_response.hpp"
#include "agent/rooms/agent_rooms.hpp"

namespace npu_run {
namespace {

class HangRoom final : public AgentRoom {
 public:
  explicit HangRoom(const RoomContext& ctx) : ctx_(ctx) {}

  // Where each rank will serve (agent/rooms/python_hooks_room.cpp) and keep its records.
  void starting(std::vector<WorkerSpec>& specs) override {
    ranks_.clear();
    if (ctx_.beats != nullptr) ranks_ = ranks_to_collect(specs, ctx_.beats->directory());
  }

  void started(Attempt& attempt) override {
    // Owned by the attempt, which the agent owns: the agent outlives every call of `found`.
    attempt.hangs = std::make_unique<HangResponse>(
        ctx_.io,
        HangResponse::Context{ctx_.cfg, attempt.assignment, ctx_.beats, *attempt.group,
                              ctx_.rendezvous, ranks_},
        [&host = ctx_.host](const Hang& hang) { host.hung(hang); });
    attempt.hangs->start();
  }

  void done(GroupEnd& end, Attempt& attempt) override {
    if (!attempt.hangs) return;
    attempt.hangs->stop();
    attempt.hangs->annotate(end.result, attempt.hang());
    end.stacks = attempt.hangs->stacks(end.result);
    if (const Hang* hang = attempt.hang()) end.hang = attempt.hangs->failure(*hang);
  }

 private:
  RoomContext ctx_;
  std::vector<RankToCollect> ranks_;
};

}  // namespace

std::unique_ptr<AgentRoom> hang_room(const RoomContext& ctx) {
  return std::make_unique<HangRoom>(ctx);
}

}  // namespace npu_run
