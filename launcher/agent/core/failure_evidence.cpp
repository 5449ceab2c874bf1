#include "agent/core/failure_evidence.hpp"

#include <csignal>

#include "health/fault_patterns.hpp"
#include "rendezvous/protocol/protocol.hpp"
#include "workers/python_traceback.hpp"

namespace npu_run {

namespace {

std::string cut_to_evidence_limit(std::string text) {
  if (text.size() > rdzv::Limits::kMaxEvidenceText) text.resize(rdzv::Limits::kMaxEvidenceText);
  return text;
}

// The last line of `text` with anything but blanks in it, without its line end and spaces.
std::string last_nonblank_line(const std::string& text) {
  size_t end = text.find_last_not_of(" \t\r\n");
  if (end == std::string::npos) return "";
  const size_t start = text.find_last_of('\n', end);
  const size_t from = start == std::string::npos ? 0 : start + 1;
  const size_t first = text.find_first_not_of(" \t", from);
  return text.substr(first, end + 1 - first);
}

}  // namespace

rdzv::FailureEvidence failure_evidence(const EvidenceSources& s) {
  const WorkerOutcome& w = s.worker;
  rdzv::FailureEvidence e;
  // The error file's traceback is the worker's own account; its stderr is the fallback.
  const std::string error_text = s.error.message + "\n" + s.error.traceback;
  std::optional<FaultMatch> fault = find_fault(error_text);
  if (!fault) fault = find_fault(w.stderr_tail);
  if (fault) e.fault = cut_to_evidence_limit(fault->meaning + ": " + fault->line);
  std::optional<PythonException> raised = last_python_exception(s.error.traceback);
  if (!raised) raised = last_python_exception(w.stderr_tail);
  if (raised) {
    e.exception = cut_to_evidence_limit(raised->type);
    e.frame = cut_to_evidence_limit(raised->frame);
  } else {
    e.last_line = cut_to_evidence_limit(last_nonblank_line(w.stderr_tail));
  }
  e.last_beat = cut_to_evidence_limit(s.last_beat);
  e.usage = w.status.kind == ExitStatus::Kind::kExited && w.status.code == 2 &&
            names_usage_error(w.stderr_tail);
  const auto failed = w.raised_at.value_or(w.finished_at);
  e.early = s.started.time_since_epoch().count() != 0 && failed - s.started < s.startup_window;
  // SIGKILL that npu_run did not send, while the kernel counted an OOM kill.
  e.oom = s.oom_killed && !w.stopped_by_agent && w.status.kind == ExitStatus::Kind::kSignaled &&
          w.status.signal == SIGKILL;
  return e;
}

}  // namespace npu_run
