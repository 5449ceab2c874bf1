// The rendezvous' part of the job's timeline: each seated node's arrival (its agent's start, its
// first hello, its join, its verdict) once the round forms and its node rank is known, the
// blame of the round, the events each node's report carries, lost nodes and decisions.
#include <fmt/format.h>

#include <algorithm>

#include "rendezvous/state/state.hpp"

namespace npu_run::rdzv {

TimelineEvent RendezvousState::job_event(TimelinePhase phase, int node,
                                         const std::string& host) const {
  TimelineEvent e;
  e.node = node;
  e.host = host;
  e.round = round_;
  e.phase = phase;
  e.time_ms = now_.wall_ms;
  return e;
}

namespace {

// A verdict in one line of the timeline: "passed in 3.1 s", "passed in 3.1 s, 2 warnings", or
// the first failure.
std::string verdict_detail(const NodeVerdict& v) {
  const double seconds = static_cast<double>(v.elapsed_ms) / 1000.0;
  if (v.failed()) return fmt::format("failed in {:.1f} s: {}", seconds, first_failure_line(v));
  const size_t warnings = v.with_status(HealthStatus::kWarn).size();
  if (warnings == 0) return fmt::format("passed in {:.1f} s", seconds);
  return fmt::format("passed in {:.1f} s, {} warning{}", seconds, warnings,
                     warnings == 1 ? "" : "s");
}

}  // namespace

NodeArrival RendezvousState::note_arrival(const Joiner& j, int node) {
  const std::string& host = j.join.node.host;
  // Looked up, never added: a joiner's connection is there while it waits.
  const auto client = clients_.find(j.id);
  if (client != clients_.end() && !client->second.seated_before) {
    client->second.seated_before = true;
    if (j.join.started_ms > 0) {
      TimelineEvent start = job_event(TimelinePhase::kAgentStart, node, host);
      start.time_ms = j.join.started_ms;
      timeline_.add(std::move(start));
    }
    if (client->second.hello_ms > 0) {
      TimelineEvent contact = job_event(TimelinePhase::kContact, node, host);
      contact.time_ms = client->second.hello_ms;
      timeline_.add(std::move(contact));
    }
  }
  TimelineEvent join = job_event(TimelinePhase::kJoin, node, host);
  join.time_ms = j.joined_ms;
  // Where it sits: why it got this seat (rendezvous/state/node_order.hpp).
  if (!j.join.node.topology.empty())
    join.detail = ("at " + j.join.node.topology.describe()).substr(0, kMaxDetail);
  timeline_.add(std::move(join));
  NodeArrival a{node, host, j.join.started_ms, j.join.dialled_ms, j.join.dials, j.joined_ms};
  if (j.verdict && j.verdict_ms > 0) {
    a.verdict_ms = j.verdict_ms;
    a.gate_ms = j.verdict->elapsed_ms;
    a.gate_slowest = j.verdict->slowest_call;
    TimelineEvent gate = job_event(TimelinePhase::kGate, node, host);
    gate.time_ms = j.verdict_ms;
    gate.detail = verdict_detail(*j.verdict);
    timeline_.add(std::move(gate));
  }
  return a;
}

void RendezvousState::note_formed(const std::vector<const Joiner*>& by_rank) {
  std::vector<NodeArrival> arrivals;
  arrivals.reserve(by_rank.size());
  int64_t began = round_began_ms_;
  int world_size = 0;
  for (size_t rank = 0; rank < by_rank.size(); ++rank) {
    const Joiner& j = *by_rank[rank];
    const int node = static_cast<int>(rank);
    if (round_ == 0 && j.join.started_ms > 0) began = std::min(began, j.join.started_ms);
    arrivals.push_back(note_arrival(j, node));
    TimelineEvent formed = job_event(TimelinePhase::kFormed, node, j.join.node.host);
    formed.detail = fmt::format("ranks {}-{}", world_size, world_size + j.join.node.nproc - 1);
    timeline_.add(std::move(formed));
    world_size += j.join.node.nproc;
  }
  if (blames_.size() >= kMaxBlamesKept) blames_.erase(blames_.begin());
  blames_.push_back(blame_round(round_, began, now_.wall_ms, arrivals, created_ms_));
  blames_.back().world_size = world_size;
  blame_new_ = true;
}

void RendezvousState::note_unseated() {
  for (const auto& [id, joiner] : pending_)
    note_arrival(joiner, joiner.join.node_rank.value_or(-1));
}

std::optional<RoundBlame> RendezvousState::take_new_blame() {
  if (!blame_new_) return std::nullopt;
  blame_new_ = false;
  return blames_.back();
}

void RendezvousState::note_report_events(const Member& member, const Report& report) {
  const int first = member.rank_offset;
  const int last = member.rank_offset + member.node.nproc - 1;
  for (const TimelineEvent& sent : report.timeline) {
    // Only this node's own ranks, and its own times as it gave them: identity comes from the
    // seat.
    if (sent.rank != -1 && (sent.rank < first || sent.rank > last)) continue;
    TimelineEvent e = sent;
    e.node = member.node_rank;
    e.host = member.node.host;
    e.round = round_;
    timeline_.add(std::move(e));
  }
}

void RendezvousState::note_lost(const Member& member, int64_t last_seen_ms) {
  TimelineEvent e = job_event(TimelinePhase::kLost, member.node_rank, member.node.host);
  e.time_ms = last_seen_ms;
  timeline_.add(std::move(e));
}

void RendezvousState::note_decision(const Decision& decision) {
  if (decisions_.size() >= kMaxBlamesKept) decisions_.erase(decisions_.begin());
  decisions_.push_back(decision);
  const bool restart = decision.action == Action::kRestart;
  TimelineEvent e = job_event(restart ? TimelinePhase::kRestart : TimelinePhase::kFinished, -1, "");
  if (restart) {
    e.detail = decision.membership_change ? "the job re-forms"
                                          : fmt::format("restart {}", decision.restart_count);
  } else {
    e.detail = fmt::format("exit code {}", decision.exit_code);
  }
  if (decision.root_cause) {
    const FailureReport& r = *decision.root_cause;
    e.detail += fmt::format("; root cause: node {} ({}) rank {}: {}", r.node_rank, r.host, r.rank,
                            r.description);
  }
  timeline_.add(std::move(e));
}

}  // namespace npu_run::rdzv
