// Why a round failed, told from what the nodes saw (FailureReport and its FailureEvidence): the
// node's fault (infrastructure), the script's (deterministic), or neither (other). Pure, one
// function, so that every rule has a unit test; the rendezvous applies it to each root cause
// and the attempt before (rendezvous/state/state_outcome.cpp).
//
// - infrastructure: a lost node, a failed health gate, a worker the OOM killer killed, or one
//   whose output named a device or link fault (health/fault_patterns.hpp);
// - deterministic: the same exception type at the same place after the same last beat as in the
//   attempt before (without an exception: the same last line of stderr and the same exit), or
//   an ImportError, ModuleNotFoundError, SyntaxError (or IndentationError, TabError), Python's
//   "No module named" (`-m`) or a usage error within --startup-window of the start;
// - other: everything else, which costs a restart of --max-restarts as it always did.
#pragma once

#include <string>

#include "rendezvous/protocol/messages.hpp"

namespace npu_run::rdzv {

struct Classification {
  FailureClass kind = FailureClass::kOther;
  std::string reason;  // "deterministic: ValueError at train.py:88 in step, twice"
};

// `previous`: the root cause of the attempt before, when that one failed too; null otherwise.
Classification classify_failure(const FailureReport& failure, const FailureReport* previous);

// "infrastructure", "deterministic", "other" ("none" for kNone).
const char* failure_class_name(FailureClass kind);

}  // namespace npu_run::rdzv
