#include "agent/core/attempt.hpp"

#include "agent/round/failure_reports.hpp"
#include "basics/exit_status.hpp"

namespace npu_run {

namespace {

// Stopped by a signal: the job ends for every node; this one leaves at once.
AttemptEnd stopped_by_signal(const GroupEnd& end, const Attempt& attempt, bool hosts_rendezvous) {
  const int sig = attempt.interrupted_by;
  AttemptEnd out;
  out.summary = end.result;
  out.summary->outcome = GroupResult::Outcome::kStopped;
  out.summary->stop_signal = sig;
  rdzv::Report report{attempt.assignment.round, rdzv::Outcome::kStopped,
                      signal_failure(attempt.assignment, sig), sig};
  // Leaving on purpose lets an elastic job re-form without this node. The agent hosting the
  // rendezvous cannot leave that way: with it goes the server, so the job ends.
  report.leaving = !hosts_rendezvous;
  out.report = std::move(report);
  out.leave_with = exit_for_signal(sig);
  return out;
}

}  // namespace

AttemptEnd report_for(const GroupEnd& end, const Attempt& attempt, bool hosts_rendezvous) {
  if (attempt.interrupted_by != 0) return stopped_by_signal(end, attempt, hosts_rendezvous);
  if (!attempt.rendezvous_lost.empty()) {
    AttemptEnd out;
    out.summary = end.result;
    out.stopped_because = "the lost rendezvous";
    out.leave_with = kExitRendezvous;
    return out;
  }
  const GroupResult& result = end.result;
  rdzv::Report report{attempt.assignment.round, rdzv::Outcome::kSucceeded, std::nullopt, 0};
  report.progressed = end.progressed;
  report.stacks = end.stacks;
  const bool own_failure = result.outcome != GroupResult::Outcome::kSucceeded;
  if (attempt.hang() != nullptr) {
    report.outcome = rdzv::Outcome::kFailed;
    report.failure = end.hang;
  } else if (attempt.job_stop) {
    // Stopped for another node's failure or for a re-form: the workers' deaths are expected.
    report.outcome = rdzv::Outcome::kStopped;
    // An error here may predate the failure that stopped us (a rank that raised and hung
    // while exiting): the rendezvous compares the times and keeps the earliest.
    if (std::holds_alternative<rdzv::FailureReport>(*attempt.job_stop) && result.root_cause)
      report.failure =
          worker_failure(result, attempt.assignment, end.root_cause_error, end.evidence);
  } else if (own_failure) {
    report.outcome = rdzv::Outcome::kFailed;
    report.failure = worker_failure(result, attempt.assignment, end.root_cause_error, end.evidence);
  }
  AttemptEnd out;
  out.report = std::move(report);
  return out;
}

}  // namespace npu_run
