// Which rank a hang is to blame on, from where every rank was when the stacks were dumped. In
// a job stuck in a collective every rank goes silent, and whichever node's timer runs out first
// is no more guilty than the others; the rank that is somewhere else (a data loader, a sleep,
// a different collective) is. The ranks whose top frame differs from the majority's are the
// odd ones out, and the first of them is the root cause.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "rendezvous/protocol/messages.hpp"

namespace npu_run::rdzv {

struct StackComparison {
  std::string majority_frame;         // the top frame most ranks share; empty: no strict majority
  size_t majority = 0;                // ranks at it
  size_t compared = 0;                // ranks with a stack
  std::vector<const RankStack*> odd;  // ranks elsewhere, in rank order, at most kMaxOddRanks
};

// Compares the top frames of `stacks`. A majority is more than half of them; without one (two
// ranks each elsewhere), nobody is odd.
StackComparison compare_stacks(const std::vector<const RankStack*>& stacks);

// The root cause of a hang once the stacks are compared: the first odd rank (on `host`, node
// `node_rank`), or `hang` itself with where its rank was stuck. `hang` is the hang as a node
// reported it (the rank whose timer ran out); its time and exit code stay.
FailureReport blame_hang(const FailureReport& hang, const StackComparison& comparison,
                         const RankStack* hung_rank_stack, const std::string& host, int node_rank);

// The root cause of a hang blamed on `culprit` (on `host`, node `node_rank`), by the flight
// records (rendezvous/state/collective_blame.hpp) or as the odd stack out: "hung: " +
// `description`.
FailureReport blame_collective_hang(const FailureReport& hang, const RankStack& culprit,
                                    const std::string& description, const std::string& host,
                                    int node_rank);

// What the summary adds when no rank had a flight recorder (torch 1.13, gloo before torch 2.8):
// the stacks alone decided.
inline constexpr const char* kNoRecorderNote =
    " (no rank had a flight recorder, which gloo has from torch 2.8: the stacks decided)";

// "train.py:88 in wait <- train.py:120 in main".
std::string join_frames(const std::vector<std::string>& frames);

}  // namespace npu_run::rdzv
