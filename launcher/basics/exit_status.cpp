#include "basics/exit_status.hpp"

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

bool ExitStatus::self_inflicted() const {
  if (kind != Kind::kSignaled) return false;
  // Not SIGABRT: npu_run sends it to a hung group for its stacks (agent/hangs/hang_response.cpp).
  for (const int own :
       {SIGPIPE, SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGSYS, SIGTRAP, SIGXCPU, SIGXFSZ}) {
    if (signal == own) return true;
  }
  return false;
}

int ExitStatus::as_exit_code() const {
  switch (kind) {
    case Kind::kExited:
      return code;
    case Kind::kSignaled:
      return exit_for_signal(signal);
    case Kind::kNotStarted:
      // As a shell answers: 127 for a program that is not there, 126 for every other reason it
      // could not be run (permission, not a binary, busy, E2BIG, EMFILE, no fork): never a code
      // a worker could have exited with for reasons of its own.
      return code == ENOENT ? 127 : 126;
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

}  // namespace npu_run
