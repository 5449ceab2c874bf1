// The guardian: a small helper process that outlives a SIGKILLed agent just long enough to kill
// its workers' process groups. PR_SET_PDEATHSIG only reaches each worker's first process, not
// the children it started (data loaders, shells); the guardian covers those. It leads a
// session of its own, so that a SIGKILL of the agent's process group or session misses it.
#pragma once

#include <sys/types.h>

#include <boost/core/noncopyable.hpp>

namespace npu_run {

class Guardian : boost::noncopyable {
 public:
  // Forks the guardian. Call while the agent is single-threaded (before any resolver thread).
  Guardian();
  // Tells the guardian the agent ends on purpose and closes the pipe: the guardian kills
  // whatever is still registered and exits; reaps it. An agent that dies without this (SIGKILL)
  // has the guardian also end every process that carries its mark.
  ~Guardian();

  // The pipe a new worker writes its own process group id to (4 bytes, in the child before
  // exec): registering from the parent after spawn would leave a window in which the worker
  // already runs, and may start children, while the guardian does not know it.
  int registration_fd() const { return pipe_fd_; }
  // Called by the agent once a worker's group is gone, so its id is never signalled after reuse.
  void forget(pid_t process_group);
  pid_t pid() const { return pid_; }

 private:
  pid_t pid_ = -1;
  int pipe_fd_ = -1;
};

}  // namespace npu_run
