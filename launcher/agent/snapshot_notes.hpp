// What `npu_run status` shows of each rank's snapshots (rdzv::RankSnapshot): the snapshot room
// (agent/snapshot_room.cpp) keeps it, the status service (agent/status_service.hpp) adds it to the
// ranks' beats it answers with and sends with heartbeats.
#pragma once

#include <cstdint>
#include <vector>

#include "rendezvous/messages.hpp"

namespace npu_run {

struct SnapshotNotes {
  std::vector<rdzv::RankSnapshot> ranks;  // by local rank; empty until a rank saved
  uint64_t changes = 0;                   // counted, so that a heartbeat carries a change

  void add_to(std::vector<rdzv::RankBeat>& beats) const {
    for (rdzv::RankBeat& b : beats) {
      const auto r = static_cast<size_t>(b.local_rank);
      if (r < ranks.size() && (ranks[r].memory >= 0 || ranks[r].stored >= 0)) b.snapshot = ranks[r];
    }
  }
};

}  // namespace npu_run
