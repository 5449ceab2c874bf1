// Notices when the process that started npu_run exits. Under mpirun (or orted, or slurmstepd)
// that process is the job's only link to the scheduler: if it dies without stopping npu_run,
// nothing ever will, and the workers would train on as orphans.
#pragma once

#include <sys/types.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <functional>
#include <string>

namespace npu_run {

class ParentWatch {
 public:
  explicit ParentWatch(boost::asio::io_context& io) : descriptor_(io) {}

  // Calls `on_exit` once, from the io_context, when the parent exits (at once if it already
  // has). Returns false, doing nothing, where the kernel has no pidfd_open (before Linux 5.3).
  bool start(std::function<void()> on_exit);
  void cancel();

  pid_t parent() const { return parent_; }
  // The parent's command name (/proc/PID/comm), read at start: "mpirun", "slurmstepd", ...
  const std::string& parent_name() const { return parent_name_; }

 private:
  boost::asio::posix::stream_descriptor descriptor_;  // a pidfd: readable once the process exits
  pid_t parent_ = 0;
  std::string parent_name_;
};

}  // namespace npu_run
