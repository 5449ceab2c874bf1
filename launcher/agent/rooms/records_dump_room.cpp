// `npu_run status --dump` on this node: when the rendezvous asks (rdzv::CollectRecords), every
// running rank's flight records and stacks are collected as a hang's are
// (agent/hangs/hang_collection.hpp: its worker server, torch_npu's dump pipe), nothing stopped,
// into its directory of the attempt (attempt_<n>/<local rank>/dump_<id>/), and what the rendezvous
// compares goes back to it. A rank without a worker server (torch 1.13, not Python) shows the
// kernel's view of it: no signal, the job goes on. Recorders asked through their pipes rewrite
// their dump files, which the watch of their watchdogs (agent/rooms/recorder_watch_room.cpp) is
// told to take for this answer, not a hang.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <filesystem>

#include "agent/hangs/hang_collection.hpp"
#include "agent/hangs/hang_stacks.hpp"
#include "agent/rooms/agent_rooms.hpp"
#include "agent/round/rank_beats.hpp"
#include "rendezvous/protocol/protocol.hpp"
#include "workers/stack_dump.hpp"

namespace npu_run {
namespace {

// Where each collected rank was, as a hang's report says it (frames never empty).
std::vector<rdzv::RankStack> stacks_of(const std::vector<CollectedRank>& collected,
                                       const std::vector<RankToCollect>& ranks,
                                       const ProgressBeats* beats) {
  GroupResult result;
  for (size_t i = 0; i < collected.size(); ++i) {
    const CollectedRank& c = collected[i];
    WorkerOutcome& w = result.workers.emplace_back();
    w.local_rank = c.local_rank;
    w.global_rank = ranks[i].rank;
    w.pid = c.pid;
    w.stack_frames = c.frames;
    if (c.record == rdzv::RankRecord::kSilent) {
      w.stack_frames = {"<answered nothing: stopped, or stuck holding the GIL>"};
    } else if (w.stack_frames.empty()) {
      w.stack_frames = kernel_top_frames(c.pid, rdzv::Limits::kMaxStackFrames);
      if (w.stack_frames.empty()) w.stack_frames = {"<no worker server, and no kernel stack>"};
    }
  }
  const auto now = std::chrono::steady_clock::now();
  return rank_stacks(result,
                     beats != nullptr ? rank_beats(*beats, now) : std::vector<rdzv::RankBeat>{},
                     collected);
}

class RecordsDumpRoom final : public AgentRoom {
 public:
  RecordsDumpRoom(const RoomContext& ctx, std::shared_ptr<AskedPipeDumps> asked)
      : ctx_(ctx), asked_(std::move(asked)) {}

  void listen(Rendezvous::Handlers& /*handlers*/, Inbox& inbox) override {
    inbox.on<rdzv::CollectRecords>(
        [this, alive = std::weak_ptr<int>(alive_)](const rdzv::CollectRecords& ask) {
          if (!alive.expired()) collect(ask);
        });
  }

  // Where each rank serves and keeps its records, as for a hang (agent/rooms/hang_room.cpp).
  void starting(std::vector<WorkerSpec>& specs) override {
    ranks_.clear();
    if (ctx_.beats != nullptr) ranks_ = ranks_to_collect(specs, ctx_.beats->directory());
  }

 private:
  void collect(const rdzv::CollectRecords& ask) {
    const Attempt* attempt = ctx_.host.attempt();
    const bool running = ctx_.host.state() == AgentState::kRunning && attempt != nullptr &&
                         attempt->group && !attempt->stopping() &&
                         attempt->assignment.round == ask.round;
    if (!running) return answer({ask.dump, "", "its workers are not running", {}});
    std::vector<RankToCollect> ranks;
    const auto pids = attempt->group->running_pids();
    for (RankToCollect rank : ranks_) {
      rank.pid = attempt->group->pid_of(rank.local_rank);
      if (std::find(pids.begin(), pids.end(), rank.pid) == pids.end()) continue;
      rank.attempt_directory = rank.directory;
      rank.directory = kept_in(rank.directory, ask.dump);
      ranks.push_back(std::move(rank));
    }
    if (ranks.empty()) return answer({ask.dump, "", "none of its workers is running", {}});
    asked_->until = std::chrono::steady_clock::now() + kCollectDeadline + kPipeDumpGrace;
    const std::string where = ranks.front().directory.empty()
                                  ? ""
                                  : fmt::format("{}/*/dump_{}",
                                                std::filesystem::path(ranks.front().directory)
                                                    .parent_path()
                                                    .parent_path()
                                                    .string(),
                                                ask.dump);
    spdlog::info("npu_run status --dump (dump {}): collecting the records of {} running ranks",
                 ask.dump, ranks.size());
    collect_hang_records(ctx_.io, ranks, kCollectDeadline,
                         [this, alive = std::weak_ptr<int>(alive_), ranks, ask,
                          where](const std::vector<CollectedRank>& collected) {
                           if (alive.expired()) return;
                           answer({ask.dump, where, "", stacks_of(collected, ranks, ctx_.beats)});
                         });
  }

  // <rank's directory>/dump_<id>, made; empty (keep no files) when it cannot be.
  static std::string kept_in(const std::string& rank_directory, uint64_t dump) {
    if (rank_directory.empty()) return "";
    const std::string path = fmt::format("{}/dump_{}", rank_directory, dump);
    std::error_code ec;
    std::filesystem::create_directories(path, ec);
    if (!ec) return path;
    spdlog::warn("cannot keep the records of npu_run status --dump in {}: {}", path, ec.message());
    return "";
  }

  void answer(const rdzv::RecordsCollected& records) { ctx_.rendezvous.send(records); }

  RoomContext ctx_;
  std::shared_ptr<AskedPipeDumps> asked_;
  std::vector<RankToCollect> ranks_;
  std::shared_ptr<int> alive_ = std::make_shared<int>(0);
};

}  // namespace

std::unique_ptr<AgentRoom> records_dump_room(const RoomContext& ctx,
                                             std::shared_ptr<AskedPipeDumps> asked) {
  return std::make_unique<RecordsDumpRoom>(ctx, std::move(asked));
}

}  // namespace npu_run
