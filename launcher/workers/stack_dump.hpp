// Before npu_run sends SIGABRT to dump hung workers' stacks (PYTHONFAULTHANDLER prints every
// Python thread's traceback on it): the processes of those process groups get a core size
// limit of 0, so that the dump costs a few lines of stderr and not a core file the size of a
// training process on every rank.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <string>
#include <vector>

namespace npu_run {

// Lowers the soft RLIMIT_CORE of every process in `process_groups` to 0 (best effort: a
// process that exits meanwhile, or one npu_run may not change, is left as it is). Returns how
// many were lowered.
int disable_core_dumps(const std::vector<pid_t>& process_groups);

// Whether `pid` runs a Python interpreter (its executable's name starts with "python"): its
// stacks come from faulthandler on SIGABRT.
bool runs_python(pid_t pid);

// What the kernel shows of a process that is not Python, one line per thread: its wait
// channel and, where readable (root), its kernel stack from /proc/<pid>/task/<tid>/stack,
// innermost first ("task 4242 (train): wchan futex_wait_queue; stack: futex_wait_queue <-
// futex_wait <- ..."). At most 64 threads; empty if the process is gone.
std::string kernel_stacks(pid_t pid);

// The main thread's innermost kernel frames, each marked "(kernel) ", or its wait channel
// where the stack is not readable: the top frames a summary shows for a worker that is not
// Python. Empty if the process is gone.
std::vector<std::string> kernel_top_frames(pid_t pid, size_t max_frames);

}  // namespace npu_run
