#include "rendezvous/state/hang_blame.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "rendezvous/protocol/protocol.hpp"

namespace npu_run::rdzv {
namespace {

// "no progress for 4.2 s after 'step 40'", from the dump's point of view.
std::string silence_text(const RankStack& s) {
  if (s.silence_ms < 0) return "no progress beat before the dump";
  return fmt::format("no progress for {:.1f} s after '{}'", static_cast<double>(s.silence_ms) / 1e3,
                     s.last_beat);
}

std::string cut(std::string text) {
  if (text.size() > Limits::kMaxText) text.resize(Limits::kMaxText);
  return text;
}

}  // namespace

std::string join_frames(const std::vector<std::string>& frames) {
  std::string out;
  for (const std::string& frame : frames) out += (out.empty() ? "" : " <- ") + frame;
  return out;
}

StackComparison compare_stacks(const std::vector<const RankStack*>& stacks) {
  StackComparison c;
  std::map<std::string, size_t> count;
  for (const RankStack* s : stacks) {
    if (s->frames.empty()) continue;
    ++c.compared;
    ++count[s->frames.front()];
  }
  for (const auto& [frame, n] : count) {
    if (n > c.majority) {
      c.majority = n;
      c.majority_frame = frame;
    }
  }
  if (c.majority * 2 <= c.compared) {
    c.majority_frame.clear();
    return c;
  }
  for (const RankStack* s : stacks) {
    if (!s->frames.empty() && s->frames.front() != c.majority_frame) c.odd.push_back(s);
  }
  std::sort(c.odd.begin(), c.odd.end(),
            [](const RankStack* a, const RankStack* b) { return a->rank < b->rank; });
  if (c.odd.size() > Limits::kMaxOddRanks) c.odd.resize(Limits::kMaxOddRanks);
  return c;
}

FailureReport blame_hang(const FailureReport& hang, const StackComparison& comparison,
                         const RankStack* hung_rank_stack, const std::string& host, int node_rank) {
  FailureReport root = hang;
  const std::string majority = comparison.majority_frame.empty()
                                   ? ""
                                   : fmt::format("{} of {} ranks were in {}", comparison.majority,
                                                 comparison.compared, comparison.majority_frame);
  if (comparison.odd.empty()) {
    if (hung_rank_stack != nullptr) {
      root.description += "; stuck in " + join_frames(hung_rank_stack->frames);
      if (comparison.majority == comparison.compared && comparison.compared > 1)
        root.description += fmt::format(" (as were all {} ranks)", comparison.compared);
    }
    root.description = cut(root.description);
    return root;
  }
  const RankStack& odd = *comparison.odd.front();
  return blame_collective_hang(hang, odd,
                               fmt::format("{}; stuck in {} (the odd one out: {})",
                                           silence_text(odd), join_frames(odd.frames), majority),
                               host, node_rank);
}

FailureReport blame_collective_hang(const FailureReport& hang, const RankStack& culprit,
                                    const std::string& description, const std::string& host,
                                    int node_rank) {
  FailureReport root = hang;
  root.host = host;
  root.node_rank = node_rank;
  root.rank = culprit.rank;
  root.local_rank = culprit.local_rank;
  root.pid = culprit.pid;
  root.error_message.clear();
  root.description = cut("hung: " + description);
  return root;
}

}  // namespace npu_run::rdzv
