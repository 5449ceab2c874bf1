#include "workers/guardian.hpp"

#include <fcntl.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>

#include "basics/descriptors.hpp"
#include "workers/escaped_processes.hpp"
#include "workers/snapshot_segments.hpp"

namespace npu_run {
namespace {

// The message of an agent that ends on purpose (a worker's registration is its group id, > 0;
// a forgotten group is its id negated).
constexpr int32_t kEndedOnPurpose = 0;

// The guardian leaves the agent's group and session, tells the agent so (`settled_fd`), ignores
// the signals a terminal sends, and holds nothing of the agent's open; returns where its pipe
// from the agent now is.
int leave_the_agent(int read_fd, int settled_fd) {
  ::prctl(PR_SET_NAME, "npu_run-guard");
  // A session (and process group) of its own: timeout(1), `kill -9 -PGID` and batch systems
  // SIGKILL the agent's group or session, and a guardian inside it would go with the agent,
  // leaving what the workers started running (issue 64). Outside, only a kill aimed at it
  // reaches it.
  (void)::setsid();
  // Out of the agent's group and session now: the agent, waiting for this byte, starts no
  // worker before. (On CI's loaded cores a group SIGKILL once came before the guardian had run
  // at all, and took it with the agent.)
  const char settled = 1;
  (void)::write(settled_fd, &settled, 1);
  ::close(settled_fd);
  // Its lifetime is tied to the pipe, not to signals: a Ctrl-C to the terminal's process group
  // must not remove it before the agent is gone.
  for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGPIPE})
    (void)::signal(sig, SIG_IGN);
  if (read_fd < 3) {  // keep it clear of the stdio slots that are pointed at /dev/null below
    const int moved = ::fcntl(read_fd, F_DUPFD, 3);
    ::close(read_fd);
    read_fd = moved;
  }
  // Hold nothing of the agent's open: a test or a shell waiting for EOF on the agent's stdout
  // must not wait for the guardian, and the agent's sockets must close when it dies. (The agent
  // is single-threaded when it forks the guardian, so the fallback's allocations are safe.)
  close_descriptors_from(3, read_fd);
  for (int fd = 0; fd < 3; ++fd) {
    const int null_fd = ::open("/dev/null", O_RDWR);
    if (null_fd >= 0 && null_fd != fd) {
      ::dup2(null_fd, fd);
      ::close(null_fd);
    }
  }
  return read_fd;
}

// The guardian's whole life: remember process groups until the agent's end of the pipe closes
// (the agent exited or was killed), then SIGKILL every group still remembered, and, unless the
// agent said it ended on purpose, every process that carries its mark.
[[noreturn]] void guardian_main(int read_fd, int settled_fd, const std::string& mark) {
  read_fd = leave_the_agent(read_fd, settled_fd);
  // A fixed table keeps the guardian allocation-free after fork; 64k groups is far above any
  // node's worker count, and overflow only loses the SIGKILL-of-agent safety net.
  static pid_t groups[65536];
  size_t count = 0;
  bool ended_on_purpose = false;
  int32_t message = 0;
  while (true) {
    const ssize_t n = ::read(read_fd, &message, sizeof(message));
    if (n < 0 && errno == EINTR) continue;
    if (n != static_cast<ssize_t>(sizeof(message))) break;  // EOF: the agent is gone
    if (message == kEndedOnPurpose) {
      ended_on_purpose = true;
    } else if (message > 0 && count < std::size(groups)) {
      groups[count++] = message;
    } else if (message < 0) {
      for (size_t i = 0; i < count; ++i) {
        if (groups[i] == -message) {
          groups[i] = groups[--count];
          break;
        }
      }
    }
  }
  for (size_t i = 0; i < count; ++i) ::kill(-groups[i], SIGKILL);
  // The agent's snapshots in memory go with it (an agent that ended removed them already).
  remove_segment_directory(segment_directory_for(mark));
  // The agent died without its last sweep of what left the workers' groups: those carry its
  // mark (escaped_processes.hpp). Its workers may all have ended (and been forgotten) a moment
  // before it was killed, as when every process of its session is SIGKILLed one by one, so an
  // empty table proves nothing; only the agent's own word does (and groups still registered
  // belie it).
  if (!ended_on_purpose || count > 0)
    (void)stop_escaped_processes(EscapeSweep{mark, false, {}, "/proc"});
  ::_exit(0);
}

}  // namespace

Guardian::Guardian() {
  const std::string& mark = agent_mark();  // made now, so that the guardian knows it too
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0)
    throw std::runtime_error(std::string("guardian: pipe: ") + std::strerror(errno));
  int settled[2];
  if (::pipe2(settled, O_CLOEXEC) != 0) {
    const int err = errno;
    ::close(fds[0]);
    ::close(fds[1]);
    throw std::runtime_error(std::string("guardian: pipe: ") + std::strerror(err));
  }
  pid_ = ::fork();
  if (pid_ < 0) {
    const int err = errno;
    for (const int fd : {fds[0], fds[1], settled[0], settled[1]}) ::close(fd);
    throw std::runtime_error(std::string("guardian: fork: ") + std::strerror(err));
  }
  if (pid_ == 0) {
    ::close(fds[1]);
    ::close(settled[0]);
    guardian_main(fds[0], settled[1], mark);
  }
  ::close(fds[0]);
  ::close(settled[1]);
  pipe_fd_ = fds[1];
  // Until the guardian has its own session (or is gone: EOF); setsid cannot block.
  char byte = 0;
  while (::read(settled[0], &byte, 1) < 0 && errno == EINTR) {
  }
  ::close(settled[0]);
}

Guardian::~Guardian() {
  if (pipe_fd_ >= 0) {
    // The agent ends on purpose: it stopped its workers and swept what they left.
    const int32_t m = kEndedOnPurpose;
    while (::write(pipe_fd_, &m, sizeof(m)) < 0 && errno == EINTR) {
    }
    ::close(pipe_fd_);
  }
  // Bounded: the guardian only kills groups that are already gone and exits.
  while (pid_ > 0 && ::waitpid(pid_, nullptr, 0) < 0 && errno == EINTR) {
  }
}

void Guardian::forget(pid_t process_group) {
  const int32_t m = -static_cast<int32_t>(process_group);
  // A 4-byte write to a pipe is atomic; if it fails the guardian is gone and there is nothing
  // better to do than carry on without the safety net.
  while (::write(pipe_fd_, &m, sizeof(m)) < 0 && errno == EINTR) {
  }
}

}  // namespace npu_run
