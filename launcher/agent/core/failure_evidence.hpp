// What this node saw of its root-cause worker's failure beyond the exit, for the rendezvous'
// restart classification (rendezvous/state/failure_class.hpp): a device fault its output or error
// file named, its exception and where it was raised, its last beat, whether it failed at start,
// whether the OOM killer killed it. Pure: the agent reads the files and the counters.
#pragma once

#include <chrono>

#include "agent/records/failure_summary.hpp"
#include "rendezvous/protocol/messages.hpp"
#include "workers/group_result.hpp"

namespace npu_run {

struct EvidenceSources {
  const WorkerOutcome& worker;
  const WorkerError& error;                          // its error file, read
  std::string last_beat;                             // its last progress beat's text
  std::chrono::system_clock::time_point started{};   // when the attempt's workers started
  std::chrono::milliseconds startup_window{60'000};  // --startup-window
  bool oom_killed = false;                           // the OOM killer killed a process of ours
};

rdzv::FailureEvidence failure_evidence(const EvidenceSources& sources);

}  // namespace npu_run
