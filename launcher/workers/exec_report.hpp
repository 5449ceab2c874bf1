// A Boost.Process initializer that lets the agent learn whether a forked worker reached exec
// without waiting for it: Boost's default launcher blocks in read() until each child has exec'd,
// which serializes spawns on exec and stalls the agent's loop for as long as an exec takes (a
// Python on a slow NFS home). With Boost's fork_and_forget launcher and this pipe, the child
// writes errno if exec fails and _exits; the pipe is close-on-exec, so after a successful exec
// no process holds its write end. Once the worker's exit is observed, one read can never block:
// 4 bytes are the errno of a failed exec, EOF means the worker really ran.
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <optional>

#include "workers/boost_process.hpp"

namespace npu_run {

class ExecReport {
 public:
  ExecReport() = default;
  ~ExecReport() { close_fds(); }
  ExecReport(const ExecReport&) = delete;
  ExecReport& operator=(const ExecReport&) = delete;

  // Parent, before fork. The child's end must survive Boost's close-all until exec.
  template <typename Launcher>
  boost::process::v2::error_code on_setup(Launcher& launcher, const std::filesystem::path&,
                                          const char* const*) {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) return {errno, boost::system::system_category()};
    read_fd_ = fds[0];
    write_fd_ = fds[1];
    launcher.fd_whitelist.push_back(write_fd_);
    return {};
  }

  // Child, when exec (or a setup step before it) failed: only async-signal-safe calls, and
  // _exit, never exit(): the agent's atexit handlers must not run in its forked copy.
  template <typename Launcher>
  void on_exec_error(Launcher&, const std::filesystem::path&, const char* const*,
                     const boost::process::v2::error_code& ec) {
    const int err = ec.value();
    (void)!::write(write_fd_, &err, sizeof(err));
    ::_exit(err == ENOENT ? 127 : 126);  // what a shell answers for a command it cannot run
  }
  // Boost 1.81 detects on_exec_error with one argument too many (posix/default_launcher.hpp,
  // invoke_on_exec_error) and then calls the four-argument form above; this overload exists only
  // to be detected and is never called.
  template <typename Launcher>
  void on_exec_error(Launcher&, const boost::process::v2::error_code&, const std::filesystem::path&,
                     const char* const*, const boost::process::v2::error_code&);

  // Parent, after fork: its copy of the write end goes, so that the read below sees EOF.
  void forked() {
    if (write_fd_ >= 0) ::close(write_fd_);
    write_fd_ = -1;
  }

  // The errno of the worker's failed exec, or nothing if it ran; call once it has exited.
  std::optional<int> exec_error() {
    int err = 0;
    ssize_t n = 0;
    do {
      n = ::read(read_fd_, &err, sizeof(err));
    } while (n < 0 && errno == EINTR);
    close_fds();
    if (n == static_cast<ssize_t>(sizeof(err))) return err;
    return std::nullopt;
  }

 private:
  void close_fds() {
    for (int* fd : {&read_fd_, &write_fd_}) {
      if (*fd >= 0) ::close(*fd);
      *fd = -1;
    }
  }

  int read_fd_ = -1;
  int write_fd_ = -1;
};

}  // namespace npu_run
