#include "agent/hangs/hang_response.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <csignal>

#include "agent/hangs/hang_stacks.hpp"
#include "agent/round/failure_reports.hpp"
#include "agent/round/rank_beats.hpp"
#include "rendezvous/protocol/describe.hpp"
#include "rendezvous/protocol/protocol.hpp"
#include "workers/stack_dump.hpp"

namespace npu_run {

namespace {

// Every node collects at the hang's wall-clock time + this (see dump_at).
constexpr std::chrono::milliseconds kDumpDelay{250};
// And in a job of several nodes stops its workers no sooner than this after it began collecting,
// so that a node whose ranks answered first does not break the collectives of a node still
// asking.
constexpr std::chrono::milliseconds kCollectGrace{500};

std::string workers_word(size_t n) {
  return n == 1 ? "worker" : "workers";
}

}  // namespace

HangResponse::HangResponse(boost::asio::io_context& io, Context context,
                           std::function<void(const Hang&)> found)
    : ctx_(std::move(context)), dump_timer_(io), io_(io) {
  if (!ctx_.cfg.supervision.hang.any() || ctx_.beats == nullptr) return;
  watch_ =
      std::make_unique<HangWatch>(io, *ctx_.beats, ctx_.cfg.supervision.hang, std::move(found));
  ctx_.group.on_each_exit(
      [this](int local_rank, bool success) { watch_->exited(local_rank, success); });
}

void HangResponse::start() {
  if (watch_) watch_->start();
}

void HangResponse::stop() {
  if (watch_) watch_->stop();
  dump_timer_.cancel();
  stopped_ = true;
}

void HangResponse::respond(const Hang& h) {
  const auto pids = ctx_.group.running_pids();
  spdlog::error(
      "local rank {} (rank {}) hung: {}; collecting the stacks of the {} running {} and "
      "stopping them",
      h.local_rank, ctx_.assignment.rank_offset + h.local_rank,
      describe(h, ctx_.cfg.shape.nproc_per_node - 1), pids.size(), workers_word(pids.size()));
  if (h.kind == Hang::Kind::kRecorderTimeout) watchdog_dump_ = {h.local_rank, h.recorder_dump};
  if (ctx_.assignment.nnodes == 1) {
    dump_stacks(pids);
    return;
  }
  const rdzv::FailureReport report = failure(h);
  ctx_.rendezvous.send(rdzv::HangNotice{ctx_.assignment.round, report});
  dump_at(report.time_ms, pids);
}

void HangResponse::dump_for(const rdzv::FailureReport& root) {
  // Every rank's stacks, not only the hung one's: where the others wait says why.
  const auto pids = ctx_.group.running_pids();
  spdlog::warn("{}; collecting the stacks of this node's {} running {} and stopping them",
               rdzv::describe(root), pids.size(), workers_word(pids.size()));
  dump_at(root.time_ms, pids);
}

// Once one rank's process is gone, the ranks waiting on it in a collective raise and leave
// where they were stuck; so no node dumps before the others were told: all of them collect at
// the hang's wall-clock time + kDumpDelay (a node that hears late, or whose clock is
// off, dumps at once; never more than kDumpDelay from now).
void HangResponse::dump_at(int64_t hang_time_ms, std::vector<pid_t> pids) {
  const int64_t now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                             std::chrono::system_clock::now().time_since_epoch())
                             .count();
  const auto wait = std::chrono::milliseconds(
      std::clamp<int64_t>(hang_time_ms + kDumpDelay.count() - now_ms, 0, kDumpDelay.count()));
  dump_timer_.expires_after(wait);
  dump_timer_.async_wait([this, alive = std::weak_ptr<bool>(alive_),
                          pids = std::move(pids)](boost::system::error_code ec) {
    if (!ec && !alive.expired() && !stopped_) dump_stacks(pids);
  });
}

// First every worker's own account through its server, then the stop.
void HangResponse::dump_stacks(const std::vector<pid_t>& pids) {
  dumped_at_ = std::chrono::steady_clock::now();
  std::vector<RankToCollect> ranks;
  for (RankToCollect rank : ctx_.ranks) {
    rank.pid = ctx_.group.pid_of(rank.local_rank);
    if (watchdog_dump_ && watchdog_dump_->first == rank.local_rank)
      rank.dumped = watchdog_dump_->second;
    if (std::find(pids.begin(), pids.end(), rank.pid) != pids.end()) ranks.push_back(rank);
  }
  const auto not_before =
      *dumped_at_ +
      (ctx_.assignment.nnodes > 1 ? kCollectGrace : std::chrono::milliseconds::zero());
  collect_hang_records(io_, ranks, kCollectDeadline,
                       [this, alive = std::weak_ptr<bool>(alive_), pids,
                        not_before](std::vector<CollectedRank> collected) {
                         if (alive.expired() || stopped_) return;
                         collected_ = std::move(collected);
                         stop_collected(pids, stop_not_before(not_before));
                       });
}

// A recorder asked through its pipe writes its dump from its own thread: it gets a moment.
std::chrono::steady_clock::time_point HangResponse::stop_not_before(
    std::chrono::steady_clock::time_point not_before) const {
  const bool dumping = std::any_of(collected_.begin(), collected_.end(),
                                   [](const CollectedRank& r) { return r.pipe_dump; });
  return dumping ? std::max(not_before, *dumped_at_ + kPipeDumpGrace) : not_before;
}

void HangResponse::stop_collected(const std::vector<pid_t>& pids,
                                  std::chrono::steady_clock::time_point not_before) {
  if (std::chrono::steady_clock::now() >= not_before) return stop_workers(pids);
  dump_timer_.expires_at(not_before);
  dump_timer_.async_wait(
      [this, alive = std::weak_ptr<bool>(alive_), pids](boost::system::error_code ec) {
        if (!ec && !alive.expired() && !stopped_) stop_workers(pids);
      });
}

// Python workers that did not answer print their own stacks on SIGABRT (faulthandler); for the
// others the kernel's view is all there is, logged before they are stopped.
void HangResponse::stop_workers(const std::vector<pid_t>& pids) {
  kernel_frames_.clear();
  bool unanswered = false;
  for (const pid_t pid : pids) {
    const CollectedRank* record = collected_of(pid);
    if (record != nullptr && record->record == rdzv::RankRecord::kServer) continue;
    unanswered = true;
    const bool silent = record != nullptr && record->record == rdzv::RankRecord::kSilent;
    if (runs_python(pid) && !silent) continue;
    const std::string stacks = kernel_stacks(pid);
    if (!stacks.empty())
      spdlog::warn("worker pid {} {}; what the kernel shows of it:\n{}", pid,
                   silent ? "answered nothing through its worker server" : "is not Python", stacks);
    kernel_frames_[pid] = kernel_top_frames(pid, rdzv::Limits::kMaxStackFrames);
  }
  if (!unanswered) return ctx_.group.stop(SIGTERM);
  disable_core_dumps(pids);
  ctx_.group.stop(SIGABRT);
  // A stopped rank (SIGSTOP, a debugger's detach) takes its SIGABRT, and prints its stacks, only
  // once it runs again; it is stopped by npu_run either way.
  for (const pid_t pid : pids) {
    const CollectedRank* record = collected_of(pid);
    if (record == nullptr || record->record != rdzv::RankRecord::kServer) ::kill(pid, SIGCONT);
  }
}

const CollectedRank* HangResponse::collected_of(pid_t pid) const {
  for (const CollectedRank& rank : collected_)
    if (rank.pid == pid) return &rank;
  return nullptr;
}

rdzv::FailureReport HangResponse::failure(const Hang& h) const {
  return hang_failure(ctx_.assignment, h, ctx_.group.pid_of(h.local_rank),
                      ctx_.cfg.shape.nproc_per_node);
}

std::vector<rdzv::RankBeat> HangResponse::beats_at_dump() const {
  return dumped_at_ && ctx_.beats != nullptr ? rank_beats(*ctx_.beats, *dumped_at_)
                                             : std::vector<rdzv::RankBeat>{};
}

void HangResponse::annotate(GroupResult& result, const Hang* hang) const {
  if (hang != nullptr) {
    // The group was stopped by npu_run for the hang: it failed, and the hung worker is its
    // root cause (what the summary shows first).
    result.outcome = GroupResult::Outcome::kFailed;
    result.stop_signal = 0;
    for (size_t i = 0; i < result.workers.size(); ++i) {
      if (result.workers[i].local_rank != hang->local_rank) continue;
      result.root_cause = i;
      result.first_exit = i;
      result.workers[i].hang = describe(*hang, ctx_.cfg.shape.nproc_per_node - 1);
    }
  }
  if (!dumped_at_) return;
  // Where every rank got to: its last beat and how long before the stacks were dumped.
  const std::vector<rdzv::RankBeat> at_dump = beats_at_dump();
  for (WorkerOutcome& w : result.workers) {
    // What its server answered before anything was killed is truer than what it printed after.
    const CollectedRank* record = collected_of(w.pid);
    if (record != nullptr && !record->frames.empty()) w.stack_frames = record->frames;
    if (record != nullptr) w.record_files = record->files;
    // A worker that is not Python, or stopped, printed nothing: the kernel's view at the dump.
    if (const auto it = kernel_frames_.find(w.pid);
        w.stack_frames.empty() && it != kernel_frames_.end())
      w.stack_frames = it->second;
    if (w.stack_frames.empty() && record != nullptr && record->record == rdzv::RankRecord::kSilent)
      w.stack_frames = {"<answered nothing: stopped, or stuck holding the GIL>"};
    if (w.local_rank < 0 || static_cast<size_t>(w.local_rank) >= at_dump.size()) continue;
    const rdzv::RankBeat& b = at_dump[static_cast<size_t>(w.local_rank)];
    w.last_beat = b.beats == 0 ? "none"
                               : fmt::format("'{}', {:.1f} s before the stacks were dumped", b.text,
                                             static_cast<double>(b.age_ms) / 1000.0);
  }
}

std::vector<rdzv::RankStack> HangResponse::stacks(const GroupResult& result) const {
  if (!dumped_at_) return {};
  std::vector<rdzv::RankStack> stacks = rank_stacks(result, beats_at_dump(), collected_);
  return stacks;
}

}  // namespace npu_run
