// Which rank a hang is to blame on, from the flight recorders' records of every rank at the
// hang (RankStack::groups, taken through the worker servers): for each process group, where the
// ranks part. Checked in this order, the first that finds a culprit decides:
//  1. a desync: at one sequence number a rank called another collective, or the same one with
//     other sizes or dtypes, than the others (every stack looks alike then);
//  2. a rank that never entered the collective its peers wait in (its sequence falls behind);
//  3. a rank whose worker server answered nothing while its peers wait in a collective
//     (stopped, or stuck holding the GIL);
//  4. a rank whose collective never completed while its peers' did (its device or link).
// Without any recorder, or when they agree on every count, the stacks decide
// (rendezvous/state/hang_blame.hpp). Pure.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "rendezvous/protocol/messages.hpp"

namespace npu_run::rdzv {

struct CollectiveBlame {
  const RankStack* culprit = nullptr;
  std::vector<const RankStack*> odd;  // every rank found apart, culprit first, in rank order
  // "rank 2 never entered all_reduce #6 of the default group, which ranks 0, 1 and 3 entered
  // 61.0 s ago; rank 2 is in train.py:88 in load_batch"
  std::string description;
};

std::optional<CollectiveBlame> blame_collectives(const std::vector<const RankStack*>& stacks);

// "0, 1 and 3"; runs of three or more as ranges ("0-14 and 16").
std::string rank_list(std::vector<int> ranks);

}  // namespace npu_run::rdzv
