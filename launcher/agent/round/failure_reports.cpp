#include "agent/round/failure_reports.hpp"

#include <fmt/format.h>

#include <chrono>

#include "basics/exit_status.hpp"
#include "rendezvous/protocol/protocol.hpp"

namespace npu_run {

namespace {

rdzv::FailureReport of_this_node(const Assignment& a) {
  rdzv::FailureReport f;
  f.host = a.host;
  f.node_rank = a.node_rank;
  return f;
}

std::string cut_evidence(std::string text) {
  if (text.size() > rdzv::Limits::kMaxEvidenceText) text.resize(rdzv::Limits::kMaxEvidenceText);
  return text;
}

int64_t wall_ms(std::chrono::system_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count();
}

}  // namespace

rdzv::FailureReport refusal_failure(const Assignment& a, const std::string& why) {
  rdzv::FailureReport f = of_this_node(a);
  f.exit_code = kExitUsage;
  f.description = why;
  return f;
}

rdzv::FailureReport devices_held_failure(const Assignment& a, const std::string& held) {
  rdzv::FailureReport f = of_this_node(a);
  f.exit_code = kExitHealth;
  f.description = "its devices are not free: " + held;
  f.evidence.fault = cut_evidence("a device is still held: " + held);
  f.time_ms = wall_ms(std::chrono::system_clock::now());
  return f;
}

rdzv::FailureReport signal_failure(const Assignment& a, int sig) {
  rdzv::FailureReport f = of_this_node(a);
  f.exit_code = exit_for_signal(sig);
  f.description = fmt::format("npu_run was stopped by {}", signal_name(sig));
  return f;
}

rdzv::FailureReport worker_failure(const GroupResult& result, const Assignment& a,
                                   const std::string& error_message,
                                   const rdzv::FailureEvidence& evidence) {
  rdzv::FailureReport f = of_this_node(a);
  f.exit_code = exit_code_for(result);
  if (!result.root_cause) return f;
  const WorkerOutcome& w = result.workers.at(*result.root_cause);
  f.rank = w.global_rank;
  f.local_rank = w.local_rank;
  f.pid = w.pid;
  f.stopped_after_error = w.stopped_by_agent;
  f.description = w.stopped_by_agent ? "raised an error, then was stopped by npu_run while exiting"
                                     : w.status.describe();
  if (w.local_rank < 0)
    f.description = "MindSpore's scheduler (MS_ROLE=MS_SCHED): " + f.description;
  if (!w.cann_findings.empty()) f.description += "; HCCL's log: " + w.cann_findings.front();
  f.error_message = error_message;
  f.evidence = evidence;
  f.time_ms = wall_ms(failed_at(w));
  return f;
}

rdzv::FailureReport hang_failure(const Assignment& a, const Hang& hang, pid_t pid, int nproc) {
  rdzv::FailureReport f = of_this_node(a);
  f.local_rank = hang.local_rank;
  f.rank = a.rank_offset + hang.local_rank;
  f.pid = pid;
  f.exit_code = kExitHang;
  f.hang = true;
  f.description = "hung: " + describe(hang, nproc - 1);
  f.time_ms = wall_ms(hang.found_at);
  return f;
}

}  // namespace npu_run
