#include "agent/core/parent_watch.hpp"

#include <spdlog/spdlog.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <boost/asio/post.hpp>
#include <csignal>
#include <fstream>

#include "basics/enum_table.hpp"
#include "basics/kernel_features.hpp"

namespace npu_run {

namespace {

// A real-time signal nobody else sends: the death signal must not be mistaken for a stop
// signal the user sent, nor be one the agent forwards to the workers.
int death_signal_number() {
  return SIGRTMIN + 3;
}

}  // namespace

void ParentWatch::start(std::function<void()> on_exit) {
  on_exit_ = std::move(on_exit);
  parent_ = getppid();
  std::ifstream comm("/proc/" + std::to_string(parent_) + "/comm");
  std::getline(comm, parent_name_);
  const long pidfd = kernel_features().pidfd_open ? syscall(SYS_pidfd_open, parent_, 0) : -1;
  if (pidfd >= 0) {
    start_pidfd(static_cast<int>(pidfd));
  } else {
    start_death_signal();
  }
  // The parent may have exited before the watch was set (then getppid() names the new parent,
  // init or a subreaper), and no event would come.
  if (getppid() != parent_) {
    cancel();
    boost::asio::post(descriptor_.get_executor(), on_exit_);
  }
}

void ParentWatch::start_pidfd(int pidfd) {
  mechanism_ = Mechanism::kPidfd;
  descriptor_.assign(pidfd);
  descriptor_.async_wait(boost::asio::posix::stream_descriptor::wait_read,
                         [this](const boost::system::error_code& ec) {
                           if (!ec) on_exit_();
                         });
}

void ParentWatch::start_death_signal() {
  mechanism_ = Mechanism::kDeathSignal;
  death_signal_.add(death_signal_number());
  ::prctl(PR_SET_PDEATHSIG, death_signal_number());
  wait_for_death_signal();
}

void ParentWatch::wait_for_death_signal() {
  death_signal_.async_wait([this](const boost::system::error_code& ec, int) {
    if (ec) return;
    // The kernel sends it when the *thread* that forked npu_run exits; if its process lives on,
    // npu_run now belongs to a sibling thread, getppid() is unchanged, and the watch goes on.
    if (getppid() == parent_) {
      spdlog::debug("the thread of {} (pid {}) that started npu_run exited; the process runs on",
                    parent_name_, parent_);
      wait_for_death_signal();
      return;
    }
    on_exit_();
  });
}

void ParentWatch::cancel() {
  boost::system::error_code ignored;
  descriptor_.close(ignored);
  if (mechanism_ == Mechanism::kDeathSignal) ::prctl(PR_SET_PDEATHSIG, 0);
  death_signal_.cancel(ignored);
  death_signal_.clear(ignored);
}

const char* to_string(ParentWatch::Mechanism mechanism) {
  static constexpr EnumTable<ParentWatch::Mechanism, 3> kNames(
      {{{ParentWatch::Mechanism::kPidfd, "pidfd"},
        {ParentWatch::Mechanism::kDeathSignal, "PR_SET_PDEATHSIG"},
        {ParentWatch::Mechanism::kNone, "nothing"}}});
  return kNames.name(mechanism).data();  // the table's literals end in '\0'
}

}  // namespace npu_run
