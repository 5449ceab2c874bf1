// ChildExits: reaps this process' children and reports each exit as an event of the agent's
// io_context. Where the kernel has pidfd_open (Linux 5.3) each child gets a pidfd that becomes
// readable when it exits; before that, one SIGCHLD signal_set wakes a waitpid(WNOHANG) pass over
// the watched children. The choice is made at run time, so one binary serves every kernel from
// 3.10; either way the exit reaches the same handler, and nothing polls.
#pragma once

#include <sys/types.h>

#include <boost/system/error_code.hpp>
#include <functional>
#include <memory>

namespace boost::asio {
class io_context;
}

namespace npu_run {

class ChildExits {
 public:
  enum class Mechanism { kPidfd, kSigchld };
  // `ec` is set only if the child could not be waited for (ECHILD: someone else reaped it);
  // otherwise `wait_status` is waitpid's raw status.
  using Handler = std::function<void(boost::system::error_code ec, int wait_status)>;

  // What the running kernel allows: pidfd from Linux 5.3 (kernel_features()), else SIGCHLD.
  static Mechanism preferred();

  // Uses preferred().
  explicit ChildExits(boost::asio::io_context& io);
  // Tests use both mechanisms on any kernel.
  ChildExits(boost::asio::io_context& io, Mechanism mechanism);
  ~ChildExits();
  ChildExits(const ChildExits&) = delete;
  ChildExits& operator=(const ChildExits&) = delete;

  // Reaps the child `pid` once it exits and then calls `on_exit`, from the io_context, never
  // from inside watch(). A child that has already exited is reported too.
  void watch(pid_t pid, Handler on_exit);
  // Stops watching `pid` without reaping it (a process SIGKILL cannot end, in state D).
  void forget(pid_t pid);

  Mechanism mechanism() const;

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;
};

// "pidfd" or "SIGCHLD", for logs.
const char* to_string(ChildExits::Mechanism mechanism);

}  // namespace npu_run
