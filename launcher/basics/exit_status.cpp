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

int ExitStatus::as_exit_code() const {
  switch (kind) {
    case Kind::kExited:
      return code;
    case Kind::kSignaled:
      return exit_for_signal(signal);
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

}  // namespace npu_run
