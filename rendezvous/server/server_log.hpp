// What node 0's log says about the rendezvous: each round, stop, re-form and decision as the
// server sends it, and at start the kernel limits that would slow many agents down. Refusals
// are logged by the server itself, which knows who was refused.
#pragma once

#include <string>

#include "rendezvous/protocol/messages.hpp"

namespace npu_run::rdzv {

// Logs `message` if it is one of the job's milestones; anything else is not logged.
void log_milestone(const ServerMessage& message, int max_restarts);

// Kernel limits that cap how many agents can connect at once, and what to run when they are
// too small for `nodes`; empty when they are fine.
std::string kernel_limit_warning(int nodes);

}  // namespace npu_run::rdzv
