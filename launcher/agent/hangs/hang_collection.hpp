// A hang's records, collected before anything is killed: every rank's worker server
// (agent/hangs/worker_server_client.hpp) is asked at once for its flight recorder's entries and
// every thread's stack; what each answered is kept in its directory of the attempt (fr_trace.json,
// stacks.txt: the files the summary lists, torch's fr_trace reads the first) and read for what
// the rendezvous compares (agent/hangs/recorded_calls.hpp). torch_npu's recorder (HCCL), which has
// no server, is asked through its dump pipe. A rank without a server (torch 1.13, not Python) or
// that answered nothing in time is the caller's to signal.
#pragma once

#include <sys/types.h>

#include <boost/asio/io_context.hpp>
#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "rendezvous/protocol/message_parts.hpp"
#include "workers/worker_spec.hpp"

namespace npu_run {

// torch_npu's and torch's watchdogs read <prefix><rank>.pipe in the rank's directory, whose
// prefixes npu_run sets (TORCH_HCCL_DEBUG_INFO_PIPE_FILE, TORCH_NCCL_DEBUG_INFO_PIPE_FILE): a line
// written there makes the recorder dump itself (to TORCH_HCCL_DEBUG_INFO_TEMP_FILE<rank>).
inline constexpr const char* kHcclDumpPipePrefix = "hccl_dump_";
inline constexpr const char* kNcclDumpPipePrefix = "nccl_dump_";

struct RankToCollect {
  int local_rank = 0;
  int rank = 0;  // global, as the dump pipes are named
  pid_t pid = -1;
  std::string server;     // its worker server's socket
  std::string directory;  // where its records are kept; empty: keep no files
  // Its directory of the attempt, where its recorders' pipes and dumps are; empty: `directory`.
  std::string attempt_directory{};
  // Its recorder's watchdog dumped it already (agent/rooms/recorder_watch_room.cpp): that dump is
  // listed, and its pipe is not asked for another over it.
  std::string dumped{};
};

struct CollectedRank {
  int local_rank = 0;
  pid_t pid = -1;
  rdzv::RankRecord record = rdzv::RankRecord::kSignal;
  bool recorder = false;
  std::vector<std::string> frames;       // its main thread's, when the server answered
  std::vector<rdzv::GroupCalls> groups;  // its recorder's, when it has one
  std::vector<std::string> files;        // what was written for it
  bool pipe_dump = false;  // a recorder was asked through its pipe: its dump is being written
};

// Recorders npu_run asked for a dump through their pipes outside a hang (`npu_run status --dump`,
// agent/rooms/records_dump_room.cpp): until `until`, a recorder's dump file that changes is that
// answer, not its watchdog's (agent/rooms/recorder_watch_room.cpp).
struct AskedPipeDumps {
  std::chrono::steady_clock::time_point until{};
};

// What a hang waits at most for the answers: a worker whose main thread is stuck answers from its
// server's thread within milliseconds; one that is stopped never does.
inline constexpr std::chrono::milliseconds kCollectDeadline{3000};
// What a recorder asked through its pipe is given to write its dump before its rank is stopped.
inline constexpr std::chrono::milliseconds kPipeDumpGrace{2000};

// Where each worker of `specs` serves its records (agent/rooms/python_hooks_room.cpp: a socket in
// the agent's directory `servers`) and keeps them (its directory of the attempt); pids unset.
std::vector<RankToCollect> ranks_to_collect(const std::vector<WorkerSpec>& specs,
                                            const std::string& servers);

// Asks every rank in `ranks` and calls `done` once with what each gave (in the same order), by
// `deadline` at the latest. `done` must guard its owner's lifetime itself.
void collect_hang_records(boost::asio::io_context& io, const std::vector<RankToCollect>& ranks,
                          std::chrono::milliseconds deadline,
                          std::function<void(std::vector<CollectedRank>)> done);

}  // namespace npu_run
