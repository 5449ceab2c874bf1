// The copies of other nodes' snapshots this agent keeps for them (the ring of copies,
// agent/snapshots/snapshot_copy_server.hpp): which global rank's step is in which file of the
// node's segment directory, and how much memory they take. Pure, like the shelf of the node's own
// (agent/snapshots/snapshot_shelf.hpp): the caller makes and removes the files it names.
//
// A rank keeps its newest two complete copies (as the shelf does its own snapshots), so that a
// node lost in the middle of sending one leaves the step before; all are of one world size (a
// copy of another world replaces them: the ranks of a re-formed world are others).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "rendezvous/protocol/snapshot_messages.hpp"

namespace npu_run {

struct HeldCopy {
  int rank = 0;  // global, in world_size's world
  int64_t step = 0;
  uint64_t bytes = 0;
  std::string name;  // its file in the segment directory
  bool complete = false;
};

class CopyLedger {
 public:
  struct Begun {
    std::string name;                  // the new copy's file
    std::vector<std::string> dropped;  // files to remove
  };
  // A copy of `rank`'s `step` begins to arrive (the caller checked the budget). Another world
  // than the copies' drops them all; an earlier one of the same rank and step is replaced.
  Begun begin(int rank, int64_t step, uint64_t bytes, int world_size);
  // It arrived whole: the files it displaces (the rank's copies beyond its newest two).
  std::vector<std::string> complete(const std::string& name);
  // It did not: its file, to remove.
  std::string abandon(const std::string& name);

  const HeldCopy* find(int rank, int64_t step) const;  // complete ones only
  // A restore to `step`: copies of later steps are a future that will not be.
  std::vector<std::string> drop_after(int64_t step);
  // Room for the node's own snapshots, which come first: the copies of the oldest step held.
  std::vector<std::string> drop_oldest();
  // A round of another world size: every copy.
  std::vector<std::string> drop_unless_world(int world_size);

  // What a join says: ranges of consecutive ranks holding the same complete steps (`memory`).
  std::vector<rdzv::SnapshotRange> ranges(size_t max_ranges) const;
  uint64_t used() const;
  int world_size() const { return world_size_; }
  const std::vector<HeldCopy>& copies() const { return copies_; }

 private:
  std::vector<std::string> remove_where(const std::function<bool(const HeldCopy&)>& which);

  std::vector<HeldCopy> copies_;
  int world_size_ = 0;
  uint64_t next_ = 1;
};

}  // namespace npu_run
