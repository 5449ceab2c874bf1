// What a group of workers reports when it is done: how each worker ended, the root cause, and
// what that means for npu_run's own exit status.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "basics/exit_status.hpp"

namespace npu_run {

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
  // When the worker wrote its error file (@record does so as the exception leaves main), which
  // can be long before the process exits: interpreter shutdown may hang on collective threads.
  std::optional<std::chrono::system_clock::time_point> raised_at;
  std::string start_error;  // why it could not be started (kNotStarted)
  // Set by the agent when it judged this worker hung and stopped the group for it: "no
  // progress for 600 s after 'step 1200' ..." (agent/round/hang_watch.hpp).
  std::string hang;
  // Set by the agent when a hang's stack dump stopped the group: "'step 1200', 4.0 s before
  // the stacks were dumped", or "none" for a worker that never beat (NPU_RUN_PROGRESS).
  std::string last_beat;
  // The innermost frames of the thread that took the signal, when its stderr held a
  // faulthandler dump ("train.py:88 in wait_for_data"; workers/python_dump.hpp), or the
  // kernel's view of a worker that is not Python, when a hang's dump asked for its stacks.
  std::vector<std::string> stack_frames;
  // A failed worker's last stderr bytes (at most kStderrTailBytes): its traceback, a device
  // fault it named.
  std::string stderr_tail;
  // The files a hang's collection kept of it: its stacks, its flight records, a recorder's dump.
  std::vector<std::string> record_files;
  // What HCCL's signatures in its CANN logs name, the most telling first (health/cann_log.hpp).
  std::vector<std::string> cann_findings;
  // Set when the job's hang analysis found its top frame differs from the majority of ranks'.
  bool odd_one_out = false;
  // Its log files that lost output, each with why: "path (No space left on device (ENOSPC))".
  std::vector<std::string> incomplete_logs;
};

struct GroupResult {
  enum class Outcome { kSucceeded, kFailed, kStopped };
  Outcome outcome = Outcome::kSucceeded;
  // Index into `workers` of the earliest error: see choose_root_cause.
  std::optional<size_t> root_cause;
  // Index of the first worker seen to fail on its own (by exiting): what started the stop.
  std::optional<size_t> first_exit;
  int stop_signal = 0;  // kStopped: the signal that stopped the job
  std::vector<WorkerOutcome> workers;
  std::chrono::steady_clock::duration elapsed{};
};

// When the worker failed: its error file's time if it wrote one, else when it ended.
std::chrono::system_clock::time_point failed_at(const WorkerOutcome& worker);

// The root cause is the earliest error, not the first exit: a rank that raised may still be
// shutting down when the ranks it left blocked in a collective fail and exit. Candidates are
// the first exit and every failed worker with an error file, even one npu_run had to stop;
// the earliest failed_at wins, the first exit on a tie.
std::optional<size_t> choose_root_cause(const std::vector<WorkerOutcome>& workers,
                                        std::optional<size_t> first_exit);

// npu_run's exit status for a finished group (see "Exit status" in docs/ARCHITECTURE.md): the
// root cause's own status, or, when npu_run stopped it while it was exiting after its error,
// the first exit's (its own status would only say that npu_run stopped it).
int exit_code_for(const GroupResult& result);

}  // namespace npu_run
