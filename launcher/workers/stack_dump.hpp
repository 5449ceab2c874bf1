// Before npu_run sends SIGABRT to dump hung workers' stacks (PYTHONFAULTHANDLER prints every
// Python thread's traceback on it): the processes of those process groups get a core size
// limit of 0, so that the dump costs a few lines of stderr and not a core file the size of a
// training process on every rank.
#pragma once

#include <sys/types.h>

#include <vector>

namespace npu_run {

// Lowers the soft RLIMIT_CORE of every process in `process_groups` to 0 (best effort: a
// process that exits meanwhile, or one npu_run may not change, is left as it is). Returns how
// many were lowered.
int disable_core_dumps(const std::vector<pid_t>& process_groups);

}  // namespace npu_run
