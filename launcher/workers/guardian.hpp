// The guardian: a small helper process that outlives a SIGKILLed agent just long enough to kill
// its workers' process groups. PR_SET_PDEATHSIG only reaches each worker's first process, not
// the children it started (data loaders, shells); the guardian covers those.
#pragma once

#include <sys/types.h>

namespace npu_run {

class Guardian {
 public:
  // Forks the guardian. Call while the agent is single-threaded (before any resolver thread).
  Guardian();
  // Closes the pipe, so the guardian kills whatever is still registered and exits; reaps it.
  ~Guardian();
  Guardian(const Guardian&) = delete;
  Guardian& operator=(const Guardian&) = delete;

  void watch(pid_t process_group);
  void forget(pid_t process_group);
  pid_t pid() const { return pid_; }

 private:
  void send(int message);
  pid_t pid_ = -1;
  int pipe_fd_ = -1;
};

}  // namespace npu_run
