// The one table npu_run prints when a job does not succeed: root cause first, then every other
// worker that did not finish cleanly, each with host, ranks, pid, result and log file.
#pragma once

#include <map>
#include <string>

#include "rendezvous/messages.hpp"
#include "workers/group_result.hpp"

namespace npu_run {

struct SummaryContext {
  std::string host;
  int node_rank = 0;
  int attempt = 0;  // TORCHELASTIC_RESTART_COUNT of the attempt being summarised
  // Set when this node's workers were stopped because of a failure elsewhere: the title says so.
  std::string stopped_because;
};

// `error_messages` maps a worker index to the message its error file recorded (may be empty).
std::string format_failure_summary(const GroupResult& result, const SummaryContext& ctx,
                                   const std::map<size_t, std::string>& error_messages);

// This node's root cause as the rendezvous passes it to every node. `error_message` comes from
// the worker's error file.
rdzv::FailureReport failure_report(const GroupResult& result, const std::string& host,
                                   int node_rank, const std::string& error_message);

// The message of a torchelastic error file (written by @record in the worker), first line only;
// empty when the file is missing or not in that format.
std::string read_error_file_message(const std::string& path);

}  // namespace npu_run
