// One attempt: this node's part in one round of the job, from its assignment to its workers'
// end. A fresh Attempt is made for every round, so nothing of an earlier one (why its workers
// were stopped, a hang, a stack dump) can carry over. What an attempt's end means for the job
// is a pure function of what happened in it (report_for), unit-tested without processes.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "agent/hangs/hang_response.hpp"
#include "agent/link/assignment.hpp"
#include "agent/round/round_workers.hpp"
#include "rendezvous/protocol/messages.hpp"
#include "workers/group_result.hpp"

namespace npu_run {

// Why the job stopped this node's workers before they ended: another node's failure, a change
// of the job's nodes, or this node's own hang. The first reason stands.
using JobStop = std::variant<rdzv::FailureReport, rdzv::Reform, Hang>;

struct Attempt {
  explicit Attempt(Assignment a) : assignment(std::move(a)) {}

  // Stopping for a reason already: the job's (first reason stands) or a stop signal.
  bool stopping() const { return job_stop.has_value() || interrupted_by != 0; }
  const Hang* hang() const { return job_stop ? std::get_if<Hang>(&*job_stop) : nullptr; }

  Assignment assignment;
  std::unique_ptr<RoundWorkers> group;
  std::unique_ptr<HangResponse> hangs;  // with --hang-timeout/--exit-timeout
  std::optional<JobStop> job_stop;
  int interrupted_by = 0;       // a stop signal to this node: the job ends, this node leaves
  std::string rendezvous_lost;  // the rendezvous was lost while the workers ran
  GroupResult result;           // once the workers are done (a refused job has none)
  std::chrono::system_clock::time_point started{};  // when its workers were started
};

// What the workers' end says beyond their result.
struct GroupEnd {
  GroupResult result;                       // with the hang's blame and the dump's beats and frames
  bool progressed = true;                   // some rank beat past its best of the earlier attempts
  std::vector<rdzv::RankStack> stacks;      // after a stack dump
  std::string root_cause_error;             // the root cause's error file, its message
  rdzv::FailureEvidence evidence;           // what the root cause's output showed
  std::optional<rdzv::FailureReport> hang;  // this node's hang, as reported
};

// What this node does once its workers are done.
struct AttemptEnd {
  std::optional<rdzv::Report> report;  // for the rendezvous; none when it is lost
  std::optional<int> leave_with;       // leave now with this exit code, not waiting for the job
  // A failure summary to print now, before leaving (`stopped_because` as SummaryContext's).
  std::optional<GroupResult> summary;
  std::string stopped_because;
};

// Pure. `hosts_rendezvous`: this agent also runs the rendezvous server (it cannot leave the job
// without ending it).
AttemptEnd report_for(const GroupEnd& end, const Attempt& attempt, bool hosts_rendezvous);

}  // namespace npu_run
