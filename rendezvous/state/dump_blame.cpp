#include "rendezvous/state/dump_blame.hpp"

#include <fmt/format.h>

#include "rendezvous/protocol/protocol.hpp"
#include "rendezvous/state/collective_blame.hpp"
#include "rendezvous/state/hang_blame.hpp"

namespace npu_run::rdzv {
namespace {

std::string host_of_stack(const RankStack* stack, const std::vector<const RankStack*>& stacks,
                          const std::vector<std::string>& hosts) {
  for (size_t i = 0; i < stacks.size() && i < hosts.size(); ++i)
    if (stacks[i] == stack) return hosts[i];
  return "?";
}

}  // namespace

DumpBlame blame_dump(const std::vector<const RankStack*>& stacks,
                     const std::vector<std::string>& host_of) {
  DumpBlame out;
  for (const RankStack* s : stacks) out.recorded = out.recorded || s->recorder;
  if (const auto blame = blame_collectives(stacks)) {
    out.sentence = fmt::format("{} (rank {} is on {})", blame->description, blame->culprit->rank,
                               host_of_stack(blame->culprit, stacks, host_of));
    for (const RankStack* s : blame->odd) out.odd_ranks.push_back(s->rank);
    out.sentence.resize(std::min(out.sentence.size(), Limits::kMaxText));
    return out;
  }
  const StackComparison comparison = compare_stacks(stacks);
  if (comparison.odd.empty()) return out;
  const RankStack& odd = *comparison.odd.front();
  out.sentence = fmt::format("rank {} on {} is in {}, where {} of {} ranks are in {}", odd.rank,
                             host_of_stack(&odd, stacks, host_of), join_frames(odd.frames),
                             comparison.majority, comparison.compared, comparison.majority_frame);
  if (!out.recorded) out.sentence += kNoRecorderNote;
  out.sentence.resize(std::min(out.sentence.size(), Limits::kMaxText));
  for (const RankStack* s : comparison.odd) out.odd_ranks.push_back(s->rank);
  return out;
}

}  // namespace npu_run::rdzv
