// The rank table of a running job: built from the rendezvous' peer table (--rank-table auto),
// or a given file checked against the ranks the rendezvous assigned (--rank-table FILE).
#pragma once

#include <string>
#include <vector>

#include "agent/link/assignment.hpp"
#include "ascend/rank_table.hpp"

namespace npu_run {

// Servers in node-rank order, each named by the address it joined with; rank ids are the
// workers' global ranks, so RANK_ID equals the table's rank_id on every node.
RankTable rank_table_from_peers(const std::vector<rdzv::PeerInfo>& peers);

// What in `table` does not fit this node's place in the job, or "" when it fits: the table's
// size, this node's server entry (matched by one of `identities`, else the entry at this node's
// rank), each local device present with rank_id = rank offset + local rank.
std::string rank_table_mismatch(const RankTable& table, const std::string& path,
                                const Assignment& assignment, const std::vector<int>& devices,
                                const std::vector<std::string>& identities);

}  // namespace npu_run
