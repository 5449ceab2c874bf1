// `npu_run msrun --join False`: the command returns at once while the job goes on under an
// agent detached from the terminal (a session of its own, no controlling terminal, its output
// in a file), supervised exactly as a joined one: the guardian, restarts, no strays. msrun's
// own --join False leaves the workers to themselves.
#pragma once

#include <sys/types.h>

#include <functional>
#include <string>

#include "agent/node_run.hpp"

namespace npu_run {

// Forks (call it before any thread exists). The child starts a session, reads /dev/null,
// writes stdout and stderr to `log_file_of(its pid)` (appended), and returns `run(hooks)`: the
// caller exits with it. `hooks` tell the parent once the agent is up (its status socket listens).
// The parent returns 0 after `announce(pid)` once the agent is up, or, when the child ended
// first, the child's status with the end of its log on stderr.
int run_detached(const std::function<std::string(pid_t)>& log_file_of,
                 const std::function<int(const LaunchHooks&)>& run,
                 const std::function<void(pid_t)>& announce);

}  // namespace npu_run
