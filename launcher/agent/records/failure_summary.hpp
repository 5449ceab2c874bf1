// The one table npu_run prints when a job does not succeed: root cause first, then every other
// worker that did not finish cleanly, each with host, ranks, pid, result and log file.
#pragma once

#include <map>
#include <string>

#include "rendezvous/protocol/messages.hpp"
#include "workers/group_result.hpp"

namespace npu_run {

struct SummaryContext {
  std::string host;
  int node_rank = 0;
  int attempt = 0;  // TORCHELASTIC_RESTART_COUNT of the attempt being summarised
  // Set when this node's workers were stopped because of a failure elsewhere: the title says so.
  std::string stopped_because;
};

// What a worker's torchelastic error file (written by @record) says about its failure.
struct WorkerError {
  std::string message;    // first line: "RuntimeError: boom"
  std::string traceback;  // extraInfo.py_callstack, at most kMaxTracebackLines lines
  std::string path;       // the file
};

// A traceback longer than this shows its first lines and where the rest is: the root cause's
// place in the code is at the end of a Python traceback, so the last lines are kept.
inline constexpr size_t kMaxTracebackLines = 40;

// `errors` maps a worker index to what its error file recorded; the root cause's traceback is
// shown under its row, as torchrun shows it.
std::string format_failure_summary(const GroupResult& result, const SummaryContext& ctx,
                                   const std::map<size_t, WorkerError>& errors);

// A torchelastic error file, read with a size limit (the worker writes it); empty fields when
// the file is missing or not in that format.
WorkerError read_worker_error(const std::string& path);

}  // namespace npu_run
