// Every FailureReport this node sends the rendezvous is made here: a job this node cannot take
// part in, a stop by signal, its own root-cause worker, and a hang. The rendezvous passes the
// job's root cause to every node, which names it in its summary (rendezvous/protocol/describe.hpp).
#pragma once

#include <sys/types.h>

#include <string>

#include "agent/link/assignment.hpp"
#include "agent/round/hang_watch.hpp"
#include "rendezvous/protocol/messages.hpp"
#include "workers/group_result.hpp"

namespace npu_run {

// This node cannot run the job as asked (exit 2 on every node, no restart); `why` is logged.
rdzv::FailureReport refusal_failure(const Assignment& a, const std::string& why);
// This node's devices are still held by another process (`held` names it): the node's fault.
rdzv::FailureReport devices_held_failure(const Assignment& a, const std::string& held);
// npu_run on this node was stopped by signal `sig`.
rdzv::FailureReport signal_failure(const Assignment& a, int sig);
// This node's root cause, from its group's result; `error_message` comes from the worker's error
// file, `evidence` from its output (agent/core/failure_evidence.hpp).
rdzv::FailureReport worker_failure(const GroupResult& result, const Assignment& a,
                                   const std::string& error_message,
                                   const rdzv::FailureEvidence& evidence);
// Local rank `hang.local_rank` (pid `pid`, -1 when not known) hung; `nproc` workers run here.
rdzv::FailureReport hang_failure(const Assignment& a, const Hang& hang, pid_t pid, int nproc);

}  // namespace npu_run
