// Snapshots in the agents' memory (npu_run_checkpoint, agent/rooms/snapshot_room.cpp) on the wire:
// what each agent holds when it joins a round, and the step the round restores, which the state
// machine chooses for the whole job (rendezvous/state/restore_choice.hpp) so that no two ranks
// resume from different steps.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace npu_run::rdzv {

// Ranks first_rank..last_rank (global, as they were when the snapshots were taken) that hold the
// same steps: in the agent's memory, complete (at most two each), and written to storage by the
// agent and still kept (the newest few). Ranks of a node mostly save in step, so a node's join
// carries one range, whatever its worker count.
struct SnapshotRange {
  int first_rank = 0;
  int last_rank = 0;
  std::vector<int64_t> memory;
  std::vector<int64_t> stored;
};

struct HeldSnapshots {
  int world_size = 0;  // of the round the snapshots were taken in
  std::vector<SnapshotRange> ranges;
  // Another node's ranks whose snapshots this agent holds copies of (the ring of copies,
  // agent/snapshots/snapshot_copy_server.hpp): only `memory` is used. Any rank of the world.
  std::vector<SnapshotRange> copies{};
  int copy_port =
      0;  // where this agent takes copies and serves them (on its node's address); 0: none
};

// An agent's copy port, as its peers reach it.
struct CopyPeer {
  std::string host;  // for people
  std::string addr;
  int port = 0;  // 0: none
};

// Ranks of this node's seat that restore from a copy another agent holds: it fetches them
// before its workers load (the seat's own agent lost them: a spare, or the node back anew).
struct RestoreFetch {
  int first_rank = 0;
  int last_rank = 0;
  CopyPeer from;
};

enum class RestoreSource { kNone, kMemory, kStorage };

// What every rank of a round loads (npu_run_checkpoint.load): the newest step every rank holds in
// its agent's memory, else the newest every rank's agent wrote to storage, else nothing known to
// npu_run (the script's own files, as without it).
struct RestorePoint {
  RestoreSource source = RestoreSource::kNone;
  int64_t step = -1;
  std::string why;                    // "every rank holds step 35 in memory"
  std::vector<RestoreFetch> fetch{};  // this node's ranks to fetch first (per node)
};

// One rank's snapshots as `npu_run status` shows them, carried with its beats: the newest step
// complete in its agent's memory, on storage and copied to another node (-1: none), and the
// writes still to come.
struct RankSnapshot {
  int64_t memory = -1;
  int64_t stored = -1;
  int to_write = 0;
  int64_t copied = -1;  // the newest step the next node's agent confirmed it holds a copy of
};

inline constexpr size_t kMaxHeldSteps = 8;  // per range and kind, on the wire

}  // namespace npu_run::rdzv
