#include "npu_run/worker_exit.hpp"

#include <fmt/format.h>
#include <sys/wait.h>

#include <cerrno>
#include <csignal>
#include <cstring>

namespace npu_run {

ExitStatus ExitStatus::from_wait_status(int wait_status) {
  if (WIFEXITED(wait_status)) return exited(WEXITSTATUS(wait_status));
  if (WIFSIGNALED(wait_status)) return signaled(WTERMSIG(wait_status));
  return ExitStatus{};
}

int ExitStatus::as_exit_code() const {
  switch (kind) {
    case Kind::kExited:
      return code;
    case Kind::kSignaled:
      return 128 + signal;
    case Kind::kNotStarted:
      // As a shell answers: 127 for a program that is not there, 126 for one found but not
      // executable (permission, not a binary or script, busy); 1 for anything else (no fork).
      switch (code) {
        case ENOENT:
          return 127;
        case EACCES:
        case ENOEXEC:
        case ETXTBSY:
        case EISDIR:
        case ELIBBAD:
        case EPERM:
          return 126;
        default:
          return 1;
      }
    case Kind::kRunning:
      return 1;
  }
  return 1;
}

std::string signal_name(int sig) {
  if (const char* abbrev = sigabbrev_np(sig)) return std::string("SIG") + abbrev;
  return fmt::format("signal {}", sig);
}

std::string ExitStatus::describe() const {
  switch (kind) {
    case Kind::kExited:
      return fmt::format("exit code {}", code);
    case Kind::kSignaled:
      return fmt::format("signal {} ({})", signal_name(signal), signal);
    case Kind::kNotStarted:
      return fmt::format("not started: {}", std::strerror(code));
    case Kind::kRunning:
      return "still running";
  }
  return "unknown";
}

std::chrono::system_clock::time_point failed_at(const WorkerOutcome& worker) {
  if (worker.raised_at && *worker.raised_at < worker.finished_at) return *worker.raised_at;
  return worker.finished_at;
}

std::optional<size_t> choose_root_cause(const std::vector<WorkerOutcome>& workers,
                                        std::optional<size_t> first_exit) {
  std::optional<size_t> best = first_exit;
  for (size_t i = 0; i < workers.size(); ++i) {
    const WorkerOutcome& w = workers[i];
    if (!w.raised_at || w.status.success()) continue;
    if (!best || failed_at(w) < failed_at(workers[*best])) best = i;
  }
  return best;
}

int exit_code_for(const GroupResult& result) {
  switch (result.outcome) {
    case GroupResult::Outcome::kSucceeded:
      return 0;
    case GroupResult::Outcome::kStopped:
      return 128 + result.stop_signal;
    case GroupResult::Outcome::kFailed: {
      std::optional<size_t> owner = result.root_cause;
      if (owner && result.workers.at(*owner).stopped_by_agent) owner = result.first_exit;
      return owner ? result.workers.at(*owner).status.as_exit_code() : 1;
    }
  }
  return 1;
}

}  // namespace npu_run
