// The one wording of what the rendezvous tells every node: the server's log, each agent's log
// and its failure summary all describe a root cause or a re-form with these.
#pragma once

#include <string>

#include "rendezvous/protocol/messages.hpp"

namespace npu_run::rdzv {

// "rank 5 (local 1, pid 4242) on node 1 (host-b): exit code 3 at 10:00:01.123; error: ...".
std::string describe(const FailureReport& failure);

// "node 2 (host-c) left the job (npu_run got signal 15); the job re-forms without it", or
// "the job re-forms as round 2 to add host-d (3 nodes)".
std::string describe(const Reform& reform);

}  // namespace npu_run::rdzv
