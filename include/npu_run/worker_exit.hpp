// How a worker ended, and what that means for npu_run's own exit status.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

namespace npu_run {

struct ExitStatus {
  enum class Kind { kRunning, kExited, kSignaled, kNotStarted };
  Kind kind = Kind::kRunning;
  int code = 0;    // exit code (kExited) or the errno of the failed start (kNotStarted)
  int signal = 0;  // kSignaled

  static ExitStatus from_wait_status(int wait_status);
  static ExitStatus exited(int code) { return {Kind::kExited, code, 0}; }
  static ExitStatus signaled(int sig) { return {Kind::kSignaled, 0, sig}; }
  static ExitStatus not_started(int err) { return {Kind::kNotStarted, err, 0}; }

  bool success() const { return kind == Kind::kExited && code == 0; }
  // What npu_run exits with when this is the root cause: the code, 128+signal, or the shell's
  // 127/126 for a program that could not be found or executed.
  int as_exit_code() const;
  // "exit code 3", "signal SIGKILL (9)", "not started: Permission denied".
  std::string describe() const;
};

// "SIGTERM" for 15; "signal 42" for numbers without a name.
std::string signal_name(int sig);

struct WorkerOutcome {
  int local_rank = 0;
  int global_rank = 0;
  pid_t pid = -1;
  ExitStatus status;
  std::chrono::system_clock::time_point finished_at{};
  bool stopped_by_agent = false;  // ended after npu_run told it to stop
  bool survived_kill = false;     // still there after SIGKILL and the bounded wait
  std::string stderr_log;         // its stderr log file, if any
  std::string error_file;         // TORCHELASTIC_ERROR_FILE
  std::string start_error;        // why it could not be started (kNotStarted)
};

struct GroupResult {
  enum class Outcome { kSucceeded, kFailed, kStopped };
  Outcome outcome = Outcome::kSucceeded;
  std::optional<size_t> root_cause;  // index into `workers` of the first failure observed
  int stop_signal = 0;               // kStopped: the signal that stopped the job
  std::vector<WorkerOutcome> workers;
  std::chrono::steady_clock::duration elapsed{};
};

// npu_run's exit status for a finished group (see "Exit status" in docs/ARCHITECTURE.md).
int exit_code_for(const GroupResult& result);

}  // namespace npu_run
