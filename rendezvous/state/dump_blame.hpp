// Which rank a live dump (`npu_run status --dump`) puts apart, from every rank's records as they
// were collected, nothing stopped: the flight records first
// (rendezvous/state/collective_blame.hpp), else the stacks (rendezvous/state/hang_blame.hpp). A job
// that is merely busy, every rank in the same place or its collectives all level, blames nobody.
// Pure.
#pragma once

#include <string>
#include <vector>

#include "rendezvous/protocol/messages.hpp"

namespace npu_run::rdzv {

struct DumpBlame {
  std::string sentence;        // empty: no rank stands apart
  std::vector<int> odd_ranks;  // the blamed rank first, then the others apart, at most kMaxOddRanks
  bool recorded = false;       // some rank had a flight recorder
};

// `host_of` names the host of each stack's node ("rank 2 on host-b"), in `stacks`' order.
DumpBlame blame_dump(const std::vector<const RankStack*>& stacks,
                     const std::vector<std::string>& host_of);

}  // namespace npu_run::rdzv
