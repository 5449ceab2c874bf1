#include "commands/detached_agent.hpp"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <iostream>
#include <stdexcept>

#include "basics/exit_status.hpp"
#include "workers/python_dump.hpp"

namespace npu_run {

namespace {

// The child's standard streams: nothing to read, everything into the log (appended: a second
// detached job into the same directory keeps the first one's lines).
void redirect_standard_streams(const std::string& log_file) {
  const int null_fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  const int log_fd = ::open(log_file.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (null_fd < 0 || log_fd < 0) {
    std::cerr << "npu_run: cannot open " << (log_fd < 0 ? log_file : "/dev/null") << ": "
              << std::strerror(errno) << "\n";
    ::_exit(1);
  }
  // dup2 clears close-on-exec on the copies: the workers inherit these three.
  ::dup2(null_fd, STDIN_FILENO);
  ::dup2(log_fd, STDOUT_FILENO);
  ::dup2(log_fd, STDERR_FILENO);
  ::close(null_fd);
  ::close(log_fd);
}

int child_side(int ready_fd, const std::string& log_file,
               const std::function<int(const LaunchHooks&)>& run) {
  ::setsid();  // no controlling terminal: a closed terminal's SIGHUP never reaches the job
  redirect_standard_streams(log_file);
  LaunchHooks hooks;
  hooks.attach = [ready_fd](boost::asio::io_context&, const LaunchHooks::StopAgent&,
                            const std::function<void()>& done) -> std::shared_ptr<void> {
    // The agent exists and its status socket listens: the parent may return.
    (void)!::write(ready_fd, "R", 1);
    ::close(ready_fd);
    done();
    return nullptr;
  };
  return run(hooks);
}

int parent_side(pid_t child, int ready_fd, const std::string& log_file,
                const std::function<void(pid_t)>& announce) {
  char ready = 0;
  ssize_t n = 0;
  do {
    n = ::read(ready_fd, &ready, 1);
  } while (n < 0 && errno == EINTR);
  ::close(ready_fd);
  if (n == 1) {
    announce(child);
    return 0;
  }
  // The child ended before its agent was up (a usage error found late, a port in use...).
  int status = 0;
  while (::waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  const int code = ExitStatus::from_wait_status(status).as_exit_code();
  std::cerr << "npu_run: the detached agent (pid " << child << ") ended before the job started, "
            << "with status " << code << "; the end of " << log_file << ":\n"
            << file_tail(log_file, 4096);
  return code == 0 ? 1 : code;
}

}  // namespace

int run_detached(const std::function<std::string(pid_t)>& log_file_of,
                 const std::function<int(const LaunchHooks&)>& run,
                 const std::function<void(pid_t)>& announce) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0)
    throw std::runtime_error(std::string("cannot make a pipe: ") + std::strerror(errno));
  std::cout.flush();
  std::cerr.flush();
  const pid_t pid = ::fork();
  if (pid < 0) {
    const int err = errno;
    ::close(fds[0]);
    ::close(fds[1]);
    throw std::runtime_error(std::string("cannot fork the detached agent: ") + std::strerror(err));
  }
  if (pid == 0) {
    ::close(fds[0]);
    return child_side(fds[1], log_file_of(::getpid()), run);
  }
  ::close(fds[1]);
  return parent_side(pid, fds[0], log_file_of(pid), announce);
}

}  // namespace npu_run
