// What `npu_run status` shows of each rank's snapshots (rdzv::RankSnapshot): the snapshot room
// (agent/rooms/snapshot_room.cpp) keeps it, the status service (agent/records/status_service.hpp)
// adds it to the ranks' beats it answers with and sends with heartbeats.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "rendezvous/protocol/messages.hpp"

namespace npu_run {

// What this round's ranks restored, once all of them did: the timeline's kRestore event.
struct RestoreRecord {
  int64_t step = -1;
  std::string detail;  // "from memory in 0.21 s; 2 steps redone (the last round reached 37)"
  int64_t time_ms = 0;
};

struct SnapshotNotes {
  std::vector<rdzv::RankSnapshot> ranks;  // by local rank; empty until a rank saved
  uint64_t changes = 0;                   // counted, so that a heartbeat carries a change
  std::optional<RestoreRecord> restored;  // this round's, once every local rank loaded

  void add_to(std::vector<rdzv::RankBeat>& beats) const {
    for (rdzv::RankBeat& b : beats) {
      const auto r = static_cast<size_t>(b.local_rank);
      if (r < ranks.size() && (ranks[r].memory >= 0 || ranks[r].stored >= 0)) b.snapshot = ranks[r];
    }
  }
};

}  // namespace npu_run
