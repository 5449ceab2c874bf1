// The health gate in the rendezvous: verdicts in, rounds formed only from the joiners that
// passed, the job checks over all of them, and the end of a static job a node failed.
#include <fmt/format.h>

#include <algorithm>

#include "health/job_health.hpp"
#include "rendezvous/protocol/protocol.hpp"
#include "rendezvous/state/state.hpp"

namespace npu_run::rdzv {

namespace {

// A failed gate names this many nodes, each with this many findings; enough to act on.
constexpr size_t kNodesNamed = 8;
constexpr size_t kFindingsPerNode = 3;

std::string finding_line(const HealthFinding& f) {
  std::string line = finding_subject(f) + ": " + f.detail;
  if (!f.fix.empty()) line += " (fix: " + f.fix + ")";
  return line;
}

// A member's whole verdict (its warning-only checks in, after the round formed) replaces the
// early one, keeping the findings the rendezvous added to that: the pings', the probe's and
// the job checks'. The node's own findings are in both.
NodeVerdict with_added_findings(NodeVerdict whole, const std::optional<NodeVerdict>& early) {
  if (!early) return whole;
  const std::vector<HealthFinding> own = whole.findings;
  for (const HealthFinding& f : early->findings) {
    const bool known = std::any_of(own.begin(), own.end(), [&](const HealthFinding& o) {
      return o.check == f.check && o.device == f.device && o.status == f.status &&
             o.detail == f.detail;
    });
    if (!known) whole.findings.push_back(f);
  }
  if (whole.findings.size() > kMaxSentFindings) whole = compact(whole);
  return whole;
}

}  // namespace

RendezvousState::Gate RendezvousState::gate_of(const Joiner& joiner) {
  if (joiner.probe_failure) return Gate::kFailed;  // whatever --health-check says
  if (joiner.join.health != HealthMode::kGate) return Gate::kReady;
  if (!joiner.verdict) return Gate::kChecking;
  return joiner.verdict->failed() ? Gate::kFailed : Gate::kReady;
}

std::string RendezvousState::joiner_label(const Joiner& joiner) const {
  if (joiner.join.node_rank)
    return fmt::format("node {} ({})", *joiner.join.node_rank, joiner.join.node.host);
  return fmt::format("{} ({})", joiner.join.node.host, joiner.join.node.addr);
}

std::vector<Outgoing> RendezvousState::on_health(ClientId from, const HealthReport& report) {
  if (Member* member = member_of(from)) {
    member->health = with_added_findings(report.verdict, member->health);
    return {};
  }
  const auto joiner = pending_.find(from);
  if (joiner == pending_.end()) {
    clients_.erase(from);
    return {reject(from, "protocol_order", "'health' from an agent that has not joined")};
  }
  const Gate before = gate_of(joiner->second);
  joiner->second.verdict = report.verdict;
  joiner->second.verdict_ms = now_.wall_ms;
  // A recheck passes the node's own checks; what the probe found of it stands.
  if (joiner->second.probe_failure)
    joiner->second.verdict->findings.push_back(*joiner->second.probe_failure);
  pinged_.erase(from);  // a new verdict (a recheck) is pinged again before it counts
  const bool passed_now = before != Gate::kReady && gate_of(joiner->second) == Gate::kReady;
  if (phase_ == Phase::kJoining) return maybe_start_round();
  // Elastic, while a round runs: a node that passed (a recheck after a failure) re-forms the
  // job to take it in, as a node that joins does.
  std::vector<Outgoing> out;
  if (passed_now && phase_ == Phase::kRunning && elastic() &&
      staying_members() < static_cast<size_t>(settings_.max_nodes)) {
    const size_t nodes = std::min<size_t>(staying_members() + 1, settings_.max_nodes);
    begin_reform(Reform{round_, joiner->second.join.node.host, -1,
                        fmt::format("the job re-forms as round {} to add {} ({} nodes), which "
                                    "passed its health checks",
                                    round_ + 1, joiner->second.join.node.host, nodes)},
                 out);
  }
  if (phase_ != Phase::kJoining && !membership_change_) tell_spares(out);
  return out;
}

std::vector<Outgoing> RendezvousState::maybe_start_round() {
  if (phase_ != Phase::kJoining || pending_.empty()) return {};
  if (auto pinging = continue_pings()) return std::move(*pinging);
  if (auto probing = continue_probe()) return std::move(*probing);
  const auto count = [&](Gate gate) {
    return static_cast<int>(std::count_if(pending_.begin(), pending_.end(), [&](const auto& p) {
      return gate_of(p.second) == gate;
    }));
  };
  if (count(Gate::kChecking) > 0) return {};  // every verdict is in before a round forms
  // The last round's nodes re-join before spares fill any seat: a slow one keeps its own.
  if (awaiting_seat_holders()) return {};
  if (!elastic()) {
    if (seat_candidates() + count(Gate::kFailed) < settings_.max_nodes) return {};
    health_notes_ = apply_job_health();
    if (count(Gate::kFailed) > 0) {
      // Spares that passed (named ones too) fill the failed nodes' seats; the failed nodes are
      // taken out.
      if (count(Gate::kReady) < settings_.max_nodes) return fail_health_gate();
      spares_fill_failed_ = true;
      std::vector<Outgoing> out = take_out_failed_gates();
      auto more = ping_or_start_round();
      out.insert(out.end(), std::make_move_iterator(more.begin()),
                 std::make_move_iterator(more.end()));
      return out;
    }
    return ping_or_start_round();
  }
  if (seat_candidates() >= settings_.min_nodes) health_notes_ = apply_job_health();
  const int ready = seat_candidates();
  if (ready < settings_.min_nodes) {
    min_reached_at_.reset();
    return {};
  }
  if (!min_reached_at_) min_reached_at_ = now_.steady;
  if (ready >= settings_.max_nodes || now_.steady - *min_reached_at_ >= settings_.last_call)
    return ping_or_start_round();
  return {};
}

std::vector<std::string> RendezvousState::apply_job_health() {
  std::vector<Joiner*> judged;
  std::vector<JobNode> nodes;
  for (auto& [id, joiner] : pending_) {
    if (!joiner.verdict || gate_of(joiner) == Gate::kFailed) continue;
    judged.push_back(&joiner);
  }
  std::sort(judged.begin(), judged.end(),
            [](const Joiner* a, const Joiner* b) { return a->arrival < b->arrival; });
  for (Joiner* joiner : judged) nodes.push_back({joiner_label(*joiner), &*joiner->verdict});
  const JobHealth job = check_job_health(nodes, settings_.strict_consistency);
  std::vector<std::string> notes = job.warnings;
  for (const auto& [index, reasons] : job.failures) {
    Joiner& joiner = *judged[index];
    for (const std::string& reason : reasons) {
      const size_t colon = reason.find(": ");
      joiner.verdict->findings.push_back(
          {reason.substr(0, colon), -1, HealthStatus::kFail, reason.substr(colon + 2), {}});
    }
  }
  // Nodes whose checks only warn (--health-check warn) are told of, not kept out.
  for (Joiner* joiner : judged) {
    if (joiner->join.health != HealthMode::kWarn || !joiner->verdict->failed()) continue;
    notes.push_back(fmt::format("{} fails its health checks (--health-check warn: it runs): {}",
                                joiner_label(*joiner), first_failure_line(*joiner->verdict)));
  }
  if (notes.size() > Limits::kMaxHealthNotes) {
    const size_t more = notes.size() - (Limits::kMaxHealthNotes - 1);
    notes.resize(Limits::kMaxHealthNotes - 1);
    notes.push_back(fmt::format("and {} more health notes", more));
  }
  return notes;
}

std::vector<Outgoing> RendezvousState::fail_health_gate() {
  std::vector<const Joiner*> failed;
  for (const auto& [id, joiner] : pending_) {
    if (gate_of(joiner) == Gate::kFailed) failed.push_back(&joiner);
  }
  std::sort(failed.begin(), failed.end(), [](const Joiner* a, const Joiner* b) {
    return std::tie(a->join.node_rank, a->join.node.host, a->arrival) <
           std::tie(b->join.node_rank, b->join.node.host, b->arrival);
  });
  std::string text = fmt::format(
      "{} of {} nodes failed the health gate; no worker started:", failed.size(), pending_.size());
  for (size_t i = 0; i < failed.size() && i < kNodesNamed; ++i) {
    size_t shown = 0;
    for (const HealthFinding& f : failed[i]->verdict->findings) {
      if (f.status != HealthStatus::kFail || shown++ == kFindingsPerNode) continue;
      text += fmt::format("\n  {}: {}", joiner_label(*failed[i]), finding_line(f));
    }
  }
  if (failed.size() > kNodesNamed)
    text += fmt::format("\n  and {} more nodes", failed.size() - kNodesNamed);
  FailureReport root;
  root.host = failed.front()->join.node.host;
  root.node_rank = failed.front()->join.node_rank.value_or(-1);
  root.exit_code = kExitHealth;
  root.description = "failed its health gate: " + first_failure_line(*failed.front()->verdict);
  root.time_ms = now_.wall_ms;
  Outgoing refusal{{}, ErrorReply{"health_gate", text}, true};
  for (const auto& [id, joiner] : pending_) refusal.to.push_back(id);
  note_unseated();
  pending_.clear();
  claimed_ranks_.clear();
  phase_ = Phase::kFinished;
  root_cause_ = root;
  final_ = Decision{round_, Action::kFinish, restart_count_, kExitHealth, root};
  note_decision(*final_);
  return {std::move(refusal)};
}

std::vector<Outgoing> RendezvousState::take_out_failed_gates() {
  std::vector<Outgoing> out;
  for (auto it = pending_.begin(); it != pending_.end();) {
    const Joiner& joiner = it->second;
    if (gate_of(joiner) != Gate::kFailed) {
      ++it;
      continue;
    }
    const std::string why = first_failure_line(*joiner.verdict);
    const auto seat = remembered_seat_.find(it->first);
    const int rank =
        seat != remembered_seat_.end() ? seat->second : joiner.join.node_rank.value_or(-1);
    take_out(it->first, joiner.join.node, rank, "failed its health gate", why);
    out.push_back(Outgoing{{it->first},
                           Dismissed{fmt::format("{} is taken out of the job: it failed its health "
                                                 "gate ({}); a spare takes its place",
                                                 joiner_label(joiner), why),
                                     0},
                           true});
    if (joiner.join.node_rank) claimed_ranks_.erase(*joiner.join.node_rank);
    if (seat != remembered_seat_.end()) remembered_seat_.erase(seat);
    it = pending_.erase(it);
  }
  return out;
}

void RendezvousState::release_kept_out(const Decision& decision, std::vector<Outgoing>& out) {
  for (auto it = pending_.begin(); it != pending_.end();) {
    if (gate_of(it->second) != Gate::kFailed) {
      ++it;
      continue;
    }
    out.push_back(Outgoing{
        {it->first},
        ErrorReply{"health_gate",
                   fmt::format("the job ended (exit {}) without this node, which failed its "
                               "health gate: {}",
                               decision.exit_code, first_failure_line(*it->second.verdict))},
        true});
    if (it->second.join.node_rank) claimed_ranks_.erase(*it->second.join.node_rank);
    it = pending_.erase(it);
  }
}

}  // namespace npu_run::rdzv
