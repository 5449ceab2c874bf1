#include "agent/hang_stacks.hpp"

#include <algorithm>

#include "rendezvous/protocol.hpp"

namespace npu_run {
namespace {

// What the stacks may take of a report: the rest of the frame holds the failure and a little.
constexpr size_t kStackBudget = rdzv::Limits::kMaxClientFrame - size_t{16} * 1024;

// A rank's share of the encoded report: its texts and the JSON around them (field names,
// numbers, quotes; escapes are rare in frames and beats and covered by the margin).
size_t encoded_size(const rdzv::RankStack& s) {
  size_t size = 120 + s.last_beat.size();
  for (const std::string& frame : s.frames) size += frame.size() + 8;
  return size;
}

size_t encoded_size(const std::vector<rdzv::RankStack>& stacks) {
  size_t size = 0;
  for (const rdzv::RankStack& s : stacks) size += encoded_size(s);
  return size;
}

std::string cut(const std::string& text, size_t max) {
  return text.size() <= max ? text : text.substr(0, max);
}

}  // namespace

std::vector<rdzv::RankStack> rank_stacks(const GroupResult& result,
                                         const std::vector<rdzv::RankBeat>& beats) {
  std::vector<rdzv::RankStack> stacks;
  for (const WorkerOutcome& w : result.workers) {
    if (w.stack_frames.empty()) continue;
    rdzv::RankStack s;
    s.rank = w.global_rank;
    s.local_rank = w.local_rank;
    s.pid = w.pid;
    for (size_t i = 0; i < w.stack_frames.size() && i < rdzv::Limits::kMaxStackFrames; ++i)
      s.frames.push_back(cut(w.stack_frames[i], rdzv::Limits::kMaxFrameText));
    if (w.local_rank >= 0 && static_cast<size_t>(w.local_rank) < beats.size()) {
      const rdzv::RankBeat& beat = beats[static_cast<size_t>(w.local_rank)];
      s.last_beat = cut(beat.text, rdzv::Limits::kMaxBeatText);
      s.silence_ms = beat.age_ms;
    }
    stacks.push_back(std::move(s));
  }
  if (encoded_size(stacks) <= kStackBudget) return stacks;
  // The comparison needs the top frame only.
  for (rdzv::RankStack& s : stacks) s.frames.resize(1);
  size_t size = 0;
  size_t kept = 0;
  while (kept < stacks.size() && size + encoded_size(stacks[kept]) <= kStackBudget)
    size += encoded_size(stacks[kept++]);
  stacks.resize(kept);
  return stacks;
}

bool apply_hang_decision(GroupResult& result, const rdzv::Decision& decision, int node_rank,
                         const std::string& host) {
  for (WorkerOutcome& w : result.workers) {
    w.odd_one_out = std::find(decision.odd_ranks.begin(), decision.odd_ranks.end(),
                              w.global_rank) != decision.odd_ranks.end();
  }
  if (!decision.root_cause || !decision.root_cause->hang) return false;
  const rdzv::FailureReport& root = *decision.root_cause;
  const bool here = root.node_rank == node_rank && root.host == host;
  // The hang the timer found here is described by the job's root cause now, on its row or not.
  for (WorkerOutcome& w : result.workers) w.hang.clear();
  result.root_cause.reset();
  if (!here) return false;
  for (size_t i = 0; i < result.workers.size(); ++i) {
    if (result.workers[i].global_rank != root.rank) continue;
    result.root_cause = i;
    constexpr std::string_view kHung = "hung: ";
    result.workers[i].hang = root.description.rfind(kHung, 0) == 0
                                 ? root.description.substr(kHung.size())
                                 : root.description;
  }
  return true;
}

}  // namespace npu_run
