// The node's snapshots in memory as bookkeeping (npu_run_checkpoint,
// agent/rooms/snapshot_room.cpp): which segment holds which rank's step, which are complete, how
// much of --checkpoint-memory they take, and which files the agent wrote to storage. Pure: the room
// makes and removes the files it names.
//
// A rank has at most two segments: the last complete one and the one being written, or, between
// saves, the last two complete ones (so that a rank killed in the middle of a save leaves its
// peers the step before in memory too). A save begins by reserving its estimated size; one that
// does not fit is refused (the worker then writes the path itself) and drops nothing.
#pragma once

#include <algorithm>
#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <vector>

#include "rendezvous/protocol/snapshot_messages.hpp"

namespace npu_run {

struct Segment {
  uint64_t id = 0;
  int rank = 0;  // local
  int64_t step = 0;
  uint64_t bytes = 0;  // reserved while it is written, its size once complete
  bool complete = false;
  std::string name;  // its file in the node's segment directory
  std::string path;  // where it goes on storage, once complete
  bool persisted = false;
};

// "1.5 GB", "300 MB", "12 kB": for messages.
std::string size_text(uint64_t bytes);

class SnapshotShelf {
 public:
  // `keep`: how many files of each rank stay on storage (--checkpoint-keep); 0 keeps all.
  SnapshotShelf(int nproc, uint64_t budget, int keep);

  struct Begun {
    const Segment* segment = nullptr;  // null: refused
    std::string refusal;
    std::vector<std::string> dropped;  // segment files to remove
    // A dropped segment already on storage, to rename to the new one's name: its memory is
    // faulted in already, which makes the copy into it about twice as fast. Empty: none.
    std::string recycled;
  };
  Begun begin(int rank, int64_t step, uint64_t estimate);
  // The segment was written: `bytes` is its size. Refused (and gone: remove `dropped`) when it
  // outgrew its reservation past the budget.
  Begun commit(uint64_t id, uint64_t bytes, std::string path);
  // A segment being written whose writer went away: its file to remove, or "".
  std::string abandon(uint64_t id);
  // Every segment still being written (the workers are gone): their files.
  std::vector<std::string> abandon_writing();
  // A restore to `step` (-1: none): segments of later steps belong to a future that will not be.
  std::vector<std::string> drop_after(int64_t step);
  // The agent wrote rank's step to `path`: the files beyond --checkpoint-keep, to delete.
  std::vector<std::string> persisted(int rank, int64_t step, const std::string& path);

  const Segment* complete(int rank, int64_t step) const;
  // The rank's newest steps in memory and on storage, for `npu_run status`; to_write is left 0.
  rdzv::RankSnapshot note(int rank) const;
  const Segment* find(uint64_t id) const;
  const std::vector<Segment>& segments() const { return segments_; }
  // What a join says: ranks numbered from `rank_offset` in a world of `world_size`; none when no
  // rank holds anything.
  std::optional<rdzv::HeldSnapshots> held(int rank_offset, int world_size) const;
  uint64_t used() const;
  uint64_t budget() const { return budget_; }
  // Bytes of the budget other nodes' copies take (agent/snapshots/copy_ledger.hpp): not the ranks'
  // own.
  void lend(uint64_t bytes) { lent_ = bytes; }
  // What is left for another segment or copy.
  uint64_t room() const { return budget_ - std::min(budget_, used() + lent_); }
  int nproc() const { return nproc_; }

 private:
  struct StoredFile {
    int64_t step = 0;
    std::string path;
  };
  std::vector<int64_t> memory_steps(int rank) const;
  std::vector<int64_t> stored_steps(int rank) const;
  std::vector<std::string> remove_if_dropped(const std::vector<uint64_t>& ids);
  std::vector<uint64_t> displaced_by(int rank, int64_t step) const;

  uint64_t own_budget() const { return budget_ - std::min(lent_, budget_); }

  int nproc_;
  uint64_t budget_;
  uint64_t lent_ = 0;
  int keep_;
  uint64_t next_id_ = 1;
  std::vector<Segment> segments_;
  std::vector<std::deque<StoredFile>> stored_;  // per rank, oldest first
};

}  // namespace npu_run
