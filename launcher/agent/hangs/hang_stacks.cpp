#include "agent/hangs/hang_stacks.hpp"

#include <algorithm>

#include "rendezvous/protocol/protocol.hpp"

namespace npu_run {
namespace {

// What the stacks may take of a report: the rest of the frame holds the failure and a little.
constexpr size_t kStackBudget = rdzv::Limits::kMaxClientFrame - size_t{16} * 1024;

// A rank's share of the encoded report: its texts and the JSON around them (field names,
// numbers, quotes; escapes are rare in frames and beats and covered by the margin).
size_t encoded_size(const rdzv::RankStack& s) {
  size_t size = 160 + s.last_beat.size();
  for (const std::string& frame : s.frames) size += frame.size() + 8;
  for (const rdzv::GroupCalls& g : s.groups) {
    size += 60 + g.group.size();
    for (const rdzv::RecordedCall& c : g.last)
      size += 90 + c.op.size() + c.sizes.size() + c.dtypes.size();
  }
  return size;
}

// The least the comparisons need: the top frame, the default group's last two calls.
void shrink(rdzv::RankStack& s) {
  s.frames.resize(1);
  if (s.groups.size() > 1) s.groups.resize(1);
  for (rdzv::GroupCalls& g : s.groups)
    if (g.last.size() > 2) g.last.erase(g.last.begin(), g.last.end() - 2);
}

void add_record(rdzv::RankStack& s, const std::vector<CollectedRank>& collected) {
  for (const CollectedRank& c : collected) {
    if (c.pid != s.pid) continue;
    s.record = c.record;
    s.recorder = c.recorder;
    s.groups = c.groups;
  }
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
                                         const std::vector<rdzv::RankBeat>& beats,
                                         const std::vector<CollectedRank>& collected) {
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
    add_record(s, collected);
    stacks.push_back(std::move(s));
  }
  if (encoded_size(stacks) <= kStackBudget) return stacks;
  for (rdzv::RankStack& s : stacks) shrink(s);
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
