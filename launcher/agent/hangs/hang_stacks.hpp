// A hang's stack dump as the job sees it: what this node reports of each rank's stack to the
// rendezvous (which compares them across the job, rendezvous/state/hang_blame.hpp), and what the
// decision that comes back changes in this node's summary.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "agent/hangs/hang_collection.hpp"
#include "rendezvous/protocol/messages.hpp"
#include "workers/group_result.hpp"

namespace npu_run {

// The stacks of this node's workers that have one, for the report, within the few kilobytes a
// report may take (rdzv::Limits::kMaxClientFrame): with many local ranks each keeps its top
// frame only and the calls of its default group's last two collectives, and past even that the
// last ranks are left out. `beats` (agent/round/rank_beats.hpp) are as of the dump, indexed by
// local rank; `collected` says how each rank's record was taken and what its recorder held.
std::vector<rdzv::RankStack> rank_stacks(const GroupResult& result,
                                         const std::vector<rdzv::RankBeat>& beats,
                                         const std::vector<CollectedRank>& collected = {});

// The job's decision after a hang, applied to this node's result: the odd ones out are marked,
// and the root cause is the decision's (the worker that rank is, when it is on this node;
// none here when it is elsewhere). Returns whether the root cause is on this node.
bool apply_hang_decision(GroupResult& result, const rdzv::Decision& decision, int node_rank,
                         const std::string& host);

}  // namespace npu_run
