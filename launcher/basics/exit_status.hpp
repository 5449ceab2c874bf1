// How a process ended, and every exit status npu_run itself uses: one place for each code.
#pragma once

#include <string>

namespace npu_run {

// Usage or configuration error, reported before anything starts.
inline constexpr int kExitUsage = 2;
// The rendezvous failed: timeout, a conflict between agents, a lost server or node. Distinct from
// the exit codes people actually use in their scripts.
inline constexpr int kExitRendezvous = 125;
// A worker hung (--hang-timeout, --exit-timeout) and no restart was left: 124, as timeout(1)
// exits when its command ran out of time.
inline constexpr int kExitHang = 124;
// A node failed its health gate (a bad NPU, link, TLS switch or setting; --health-check): no
// worker started anywhere. Requeue elsewhere: the hosts named are the problem, not the job.
inline constexpr int kExitHealth = 122;
// Do not requeue: a deterministic failure (the same exception at the same place twice, or the
// script broken at start: rendezvous/state/failure_class.hpp), or --max-no-progress-restarts
// restarts in a row ended before any rank beat past its best. Restarting again would only repeat
// it.
inline constexpr int kExitNoProgress = 123;

// 128 + N: a process killed by signal N, or npu_run itself stopped by it (as shells report).
constexpr int exit_for_signal(int sig) {
  return 128 + sig;
}

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
  // Killed by a signal the process brings on itself and npu_run never sends: a write to a closed
  // pipe (SIGPIPE), a crash (SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGSYS, SIGTRAP), a limit
  // (SIGXCPU, SIGXFSZ). Such an end is its own even while npu_run was stopping it.
  bool self_inflicted() const;
};

// "SIGTERM" for 15; "signal 42" for numbers without a name.
std::string signal_name(int sig);

}  // namespace npu_run
