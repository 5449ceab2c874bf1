// What a job remembers across its rounds, apart from who is connected: the round, the restart
// counts, the no-progress count, the last root cause (the restart classification compares the
// next one with it), the command every agent must run, and the hosts the job took out. With an
// etcd rendezvous it lives in etcd (agent/link/etcd_rendezvous.hpp), so that a new leader continues
// the job where the lost one left it instead of starting a fresh one.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "rendezvous/protocol/messages.hpp"

namespace npu_run::rdzv {

// Who held a seat (a node rank) of the last round formed: a new leader gives it back to the
// same agent and offers a vacated one to a spare like its holder.
struct SeatHolder {
  std::string agent;  // Join::agent
  std::string host;
  std::string affinity;
  int nproc = 1;
};

// Seats are remembered up to this many nodes: the memory must stay below etcd's request limit
// (1.5 MiB by default); a larger job's successor seats its nodes afresh.
inline constexpr size_t kMaxRememberedSeats = 8'192;

struct JobMemory {
  uint64_t round = 0;
  bool round_running = false;  // a round had formed and not yet been decided
  bool finished = false;       // the job has ended: nobody is to continue it
  int restart_count = 0;
  int charged_restarts = 0;  // of --max-restarts
  int no_progress_restarts = 0;
  std::optional<FailureReport> previous_failure;
  std::string command;
  std::set<std::string> ledgered_hosts;
  // The leader that wrote it: the node whose loss a successor continues after.
  std::string leader_host;
  std::vector<SeatHolder> seats;  // by node rank; empty before the first round, or too many
};

nlohmann::json to_json(const JobMemory& memory);
// Throws std::invalid_argument naming a field of the wrong type or out of range.
JobMemory memory_from(const nlohmann::json& j);

// Where a successor starts: a round that was running when its leader was lost ends as a
// failure of the leader's node (an infrastructure fault), so the next round is one later and
// the restart count one higher, as for any lost node; one still forming goes on forming.
JobMemory successor_memory(JobMemory memory, int64_t wall_ms);

}  // namespace npu_run::rdzv
