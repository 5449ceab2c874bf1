// The straggler watch on this node (--straggler; rendezvous/state/straggler_desk.hpp decides):
// while the round's workers run, every third of a window each rank's worker server is asked for its
// flight recorder's entries (agent/hangs/worker_server_client.hpp: no stacks, nothing stopped), and
// what the ranks entered since the last sample goes to the rendezvous (rdzv::CollectiveSample). A
// rank without a recorder behind a server (torch before 2.8, a worker that is not Python,
// torch_npu's HCCL recorder, which has none) gives nothing; when no rank of the node gives
// anything, the agent says so once and goes on asking (a refused connection costs nothing).
#include <spdlog/spdlog.h>

#include <algorithm>
#include <boost/asio/steady_timer.hpp>

#include "agent/hangs/recorded_calls.hpp"
#include "agent/hangs/worker_server_client.hpp"
#include "agent/rooms/agent_rooms.hpp"
#include "rendezvous/protocol/straggler_wire.hpp"
#include "workers/progress_beats.hpp"

namespace npu_run {
namespace {

// What a sample waits for its answers: a worker's server answers from a thread of its own.
constexpr std::chrono::milliseconds kSampleDeadline{2000};
// Samples without any recorder's answer before the agent says it reads nothing.
constexpr int kSilentSamplesToSay = 6;

class StragglerRoom final : public AgentRoom {
 public:
  explicit StragglerRoom(const RoomContext& ctx) : ctx_(ctx), timer_(ctx.io) {
    const StragglerSettings& s = ctx.cfg.supervision.straggler;
    period_ = std::max(std::chrono::milliseconds(300), s.window / 3);
    on_ = s.mode != StragglerMode::kOff && ctx.beats != nullptr;
  }

  void starting(std::vector<WorkerSpec>& specs) override {
    ranks_.clear();
    if (on_) ranks_ = ranks_to_collect(specs, ctx_.beats->directory());
    after_ns_.assign(ranks_.size(), 0);
  }

  void started(Attempt& attempt) override {
    if (ranks_.empty()) return;
    round_ = attempt.assignment.round;
    ++generation_;
    arm();
  }

  void done(GroupEnd& /*end*/, Attempt& /*attempt*/) override { quiet(); }

  // NOLINTNEXTLINE(performance-unnecessary-value-param): the interface's
  void finishing(std::function<void()> done) override {
    quiet();
    done();
  }

 private:
  void quiet() {
    ++generation_;
    timer_.cancel();
  }

  void arm() {
    timer_.expires_after(period_);
    timer_.async_wait([this, alive = std::weak_ptr<int>(alive_),
                       generation = generation_](boost::system::error_code ec) {
      if (ec || alive.expired() || generation != generation_) return;
      sample();
    });
  }

  void sample() {
    const Attempt* attempt = ctx_.host.attempt();
    if (ctx_.host.state() != AgentState::kRunning || attempt == nullptr || !attempt->group ||
        attempt->stopping())
      return;
    std::vector<WorkerServerAsk> asks;
    asks.reserve(ranks_.size());
    for (const RankToCollect& r : ranks_) asks.push_back({r.local_rank, r.server});
    ask_worker_recorders(ctx_.io, asks, kSampleDeadline,
                         [this, alive = std::weak_ptr<int>(alive_),
                          generation = generation_](const std::vector<WorkerAnswer>& answers) {
                           if (alive.expired() || generation != generation_) return;
                           send(answers);
                           arm();
                         });
  }

  void send(const std::vector<WorkerAnswer>& answers) {
    rdzv::CollectiveSample sample{round_, {}};
    bool any = false;
    for (size_t i = 0; i < answers.size() && i < ranks_.size(); ++i) {
      auto calls = entered_calls(answers[i].fr_trace_json, after_ns_[i]);
      if (!calls) continue;
      any = true;
      after_ns_[i] = calls->latest_ns;
      sample.ranks.push_back({ranks_[i].rank, std::move(calls->calls)});
    }
    if (any) {
      silent_ = 0;
      rdzv::fit_sample(sample);  // the newest calls, within a client frame
      ctx_.rendezvous.send(sample);
    } else if (++silent_ == kSilentSamplesToSay && !said_) {
      said_ = true;
      spdlog::info(
          "the straggler watch has read nothing on this node for {:.0f} s: no worker answers with "
          "a "
          "flight recorder yet (torch 2.8 and later serve one through the worker server, once "
          "torch.distributed is imported; --straggler off stops asking)",
          std::chrono::duration<double>(period_ * kSilentSamplesToSay).count());
    }
  }

  RoomContext ctx_;
  boost::asio::steady_timer timer_;
  std::chrono::milliseconds period_{10'000};
  bool on_ = false;
  std::vector<RankToCollect> ranks_;
  std::vector<int64_t> after_ns_;  // by rank: its newest call sent so far
  uint64_t round_ = 0;
  uint64_t generation_ = 0;  // a sample of an earlier attempt is dropped
  int silent_ = 0;
  bool said_ = false;
  std::shared_ptr<int> alive_ = std::make_shared<int>(0);
};

}  // namespace

std::unique_ptr<AgentRoom> straggler_room(const RoomContext& ctx) {
  return std::make_unique<StragglerRoom>(ctx);
}

}  // namespace npu_run
