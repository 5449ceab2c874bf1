// Which step a round restores (rendezvous/protocol/snapshot_messages.hpp): a pure function of what
// the round's seats hold, decided once by the state machine for every node, like a restart.
//
// Memory wins when every rank of the round holds one same step in the memory of the agent that
// now has its seat (an agent that kept its seat, and the world size did not change), or in a
// copy another agent of the round holds (the ring of copies): the seat's agent then fetches
// those ranks from that one before its workers load them. Otherwise
// storage: the newest step that every rank's agent wrote to storage in this job, whoever wrote
// it (the files are on the job's shared storage). Otherwise nothing npu_run knows of: each rank
// loads the script's own file, as it would without npu_run.
#pragma once

#include <string>
#include <vector>

#include "rendezvous/protocol/snapshot_messages.hpp"

namespace npu_run::rdzv {

// One seat of the round being formed, and what its agent said it holds when it joined.
struct SeatHolding {
  int node_rank = 0;
  int rank_offset = 0;
  int nproc = 0;
  std::string host;
  const HeldSnapshots* held = nullptr;  // none: a new agent, or one that took no snapshot
  std::string addr{};                   // where peers reach its agent (its copy port's address)
};

// The step for every seat, and, by seat, the ranks its agent fetches from another's copies.
struct RestoreChoice {
  RestorePoint point;
  std::vector<std::vector<RestoreFetch>> fetch;  // by seat, as given
};

RestoreChoice choose_restore(const std::vector<SeatHolding>& seats, int world_size);

}  // namespace npu_run::rdzv
