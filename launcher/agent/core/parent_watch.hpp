// Notices when the process that started npu_run exits. Under mpirun (or orted, or slurmstepd)
// that process is the job's only link to the scheduler: if it dies without stopping npu_run,
// nothing ever will, and the workers would train on as orphans.
#pragma once

#include <sys/types.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/signal_set.hpp>
#include <functional>
#include <string>

namespace npu_run {

class ParentWatch {
 public:
  enum class Mechanism { kNone, kPidfd, kDeathSignal };

  explicit ParentWatch(boost::asio::io_context& io) : descriptor_(io), death_signal_(io) {}

  // Calls `on_exit` once, from the io_context, when the parent exits (at once if it already
  // has). With a pidfd of the parent where the kernel has pidfd_open (Linux 5.3), else with
  // PR_SET_PDEATHSIG, which every kernel has.
  void start(std::function<void()> on_exit);
  void cancel();

  Mechanism mechanism() const { return mechanism_; }
  pid_t parent() const { return parent_; }
  // The parent's command name (/proc/PID/comm), read at start: "mpirun", "slurmstepd", ...
  const std::string& parent_name() const { return parent_name_; }

 private:
  void start_pidfd(int pidfd);
  void start_death_signal();
  void wait_for_death_signal();

  boost::asio::posix::stream_descriptor descriptor_;  // a pidfd: readable once the process exits
  boost::asio::signal_set death_signal_;
  std::function<void()> on_exit_;
  Mechanism mechanism_ = Mechanism::kNone;
  pid_t parent_ = 0;
  std::string parent_name_;
};

const char* to_string(ParentWatch::Mechanism mechanism);

}  // namespace npu_run
