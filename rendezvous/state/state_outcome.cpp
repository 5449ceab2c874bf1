#include <fmt/format.h>

#include <algorithm>
#include <unordered_map>

#include "rendezvous/protocol/protocol.hpp"
#include "rendezvous/state/collective_blame.hpp"
#include "rendezvous/state/failure_class.hpp"
#include "rendezvous/state/hang_blame.hpp"
#include "rendezvous/state/state.hpp"

namespace npu_run::rdzv {
namespace {

// Why a node's fault ends the job rather than costing a free restart.
const char* no_spare_left(int spares) {
  return spares > 0 ? "; no spare is left to take its place"
                    : "; no spare (--spares) to take its place";
}

}  // namespace

void RendezvousState::begin_reform(Reform reform, std::vector<Outgoing>& out) {
  if (phase_ != Phase::kRunning) return;
  membership_change_ = true;
  phase_ = Phase::kStopping;
  Outgoing stop{{}, std::move(reform), false};
  for (const Member& m : members_) {
    if (!m.reported) stop.to.push_back(m.id);
  }
  if (!stop.to.empty()) out.push_back(std::move(stop));
}

void RendezvousState::record_failure(const FailureReport& failure, bool deliberate, ClientId from,
                                     std::vector<Outgoing>& out) {
  if (root_cause_) {
    // Later failures are mostly consequences, but a later report can carry an earlier error:
    // a rank that raised and then hung while exiting, as the ranks it left blocked in a
    // collective failed and were reported first. The earliest error is the root cause (the
    // stop has gone out already). Deliberate stops (signals, fatal checks) are never replaced.
    if (!deliberate_stop_ && !deliberate && failure.time_ms > 0 &&
        failure.time_ms < root_cause_->time_ms) {
      const int exit_code = root_cause_->exit_code;
      root_cause_ = failure;
      if (failure.stopped_after_error) root_cause_->exit_code = exit_code;
    }
    return;
  }
  root_cause_ = failure;
  deliberate_stop_ = deliberate;
  if (phase_ != Phase::kRunning) return;
  phase_ = Phase::kStopping;
  Outgoing stop{{}, StopWorkers{round_, failure}, false};
  for (const Member& m : members_) {
    if (!m.reported && m.id != from) stop.to.push_back(m.id);
  }
  if (!stop.to.empty()) out.push_back(std::move(stop));
}

// The hung node stops the others now, before its own report: see HangNotice. One that crossed
// the round's end, or came after a root cause, changes nothing.
std::vector<Outgoing> RendezvousState::on_hang_notice(ClientId from, const HangNotice& notice) {
  Member* member = member_of(from);
  if (member == nullptr || phase_ != Phase::kRunning || notice.round != round_ || member->reported)
    return {};
  FailureReport failure = notice.failure;
  failure.host = member->node.host;  // identity comes from the seat
  failure.node_rank = member->node_rank;
  failure.hang = true;
  if (failure.time_ms == 0) failure.time_ms = now_.wall_ms;
  std::vector<Outgoing> out;
  record_failure(failure, false, from, out);
  return out;
}

// A node leaving on purpose (its agent signalled: its ssh session lost, its host shutting
// down). An elastic job re-forms without it. A static one with a spare ready hands the spare
// its seat as a lost node's, and no restart is charged; it is not ledgered (nothing says the
// host is bad). Otherwise (false) it is a deliberate stop that ends the job.
bool RendezvousState::leave(Member& member, const Report& report, ClientId from,
                            std::vector<Outgoing>& out) {
  if (elastic()) {
    member.left = true;
    begin_reform(Reform{round_, member.node.host, member.node_rank,
                        fmt::format("left the job (npu_run got signal {}); the job re-forms "
                                    "without it",
                                    report.stop_signal)},
                 out);
    return true;
  }
  if (settings_.spares == 0 || !spare_can_take(member.node_rank)) return false;
  member.left = true;
  FailureReport failure;
  failure.host = member.node.host;
  failure.node_rank = member.node_rank;
  failure.exit_code = exit_for_signal(report.stop_signal);
  failure.description = fmt::format("left the job (npu_run got signal {})", report.stop_signal);
  failure.time_ms = now_.wall_ms;
  failure.lost = true;
  record_failure(failure, false, from, out);
  return true;
}

std::vector<Outgoing> RendezvousState::on_report(ClientId from, const Report& report) {
  Member* member = member_of(from);
  if (member == nullptr || (phase_ != Phase::kRunning && phase_ != Phase::kStopping)) {
    if (member == nullptr && phase_ != Phase::kFinished) {
      clients_.erase(from);
      return {reject(from, "protocol_order",
                     "'report' from an agent that is not in the running round")};
    }
    return {};  // a late report after the decision crossed it: nothing to do
  }
  if (report.round != round_ || member->reported) return {};  // stale, or a duplicate
  member->reported = true;
  ++reported_;
  note_report_events(*member, report);
  std::vector<Outgoing> out;
  const bool by_signal = report.outcome == Outcome::kStopped && report.stop_signal != 0;
  if (report.progressed) round_progressed_ = true;
  // Only this node's own ranks: identity comes from the seat.
  member->stacks.clear();
  for (const RankStack& stack : report.stacks) {
    if (stack.rank < member->rank_offset || stack.rank >= member->rank_offset + member->node.nproc)
      continue;
    member->stacks.push_back(stack);
    member->stacks.back().local_rank = stack.rank - member->rank_offset;
  }
  if (by_signal && report.leaving && !root_cause_ && leave(*member, report, from, out)) {
    decide_if_complete(out);
    return out;
  }
  // Nodes stopped to re-form report the errors of workers dying from that stop: no failure.
  if (membership_change_ && !root_cause_ && report.outcome == Outcome::kStopped && !by_signal) {
    decide_if_complete(out);
    return out;
  }
  // A node stopped because of another's failure may still carry an earlier error of its own.
  if (report.outcome == Outcome::kFailed ||
      (report.outcome == Outcome::kStopped && (report.stop_signal != 0 || report.failure))) {
    FailureReport failure = report.failure.value_or(FailureReport{});
    // Identity comes from the seat, not from what the agent claims.
    failure.host = member->node.host;
    failure.node_rank = member->node_rank;
    if (report.outcome == Outcome::kStopped && failure.description.empty()) {
      failure.description = fmt::format("npu_run was stopped by signal {}", report.stop_signal);
      failure.exit_code = exit_for_signal(report.stop_signal);
    }
    if (failure.time_ms == 0) failure.time_ms = now_.wall_ms;
    // A signalled agent left on purpose; a fatal failure would only fail again: no restart.
    record_failure(failure, by_signal || report.fatal, from, out);
  }
  decide_if_complete(out);
  return out;
}

void RendezvousState::decide_if_complete(std::vector<Outgoing>& out) {
  if (phase_ != Phase::kRunning && phase_ != Phase::kStopping) return;
  if (reported_ < members_.size()) return;
  Decision decision;
  decision.round = round_;
  if (root_cause_ && root_cause_->hang) blame_hang_on_stacks(decision);
  decision.root_cause = root_cause_;
  const Classification cls = classify_round();
  decision.failure_class = cls.kind;
  decision.class_reason = cls.reason;
  const bool infrastructure = cls.kind == FailureClass::kInfrastructure;
  // A failed restart that no node saw progress in extends the run; progress ends it. A node's
  // fault says nothing of the script's progress.
  if (round_progressed_)
    no_progress_restarts_ = 0;
  else if (root_cause_ && restart_count_ > 0 && !infrastructure)
    ++no_progress_restarts_;
  const bool stuck = root_cause_ && settings_.max_no_progress_restarts > 0 &&
                     no_progress_restarts_ >= settings_.max_no_progress_restarts;
  const bool broken_script = cls.kind == FailureClass::kDeterministic;
  const bool free_restart = infrastructure && restart_is_free();
  if (infrastructure && !free_restart) decision.class_reason += no_spare_left(settings_.spares);
  if (root_cause_ && !deliberate_stop_ && !stuck && !broken_script &&
      (free_restart || charged_restarts_ < settings_.max_restarts)) {
    ++restart_count_;
    if (!free_restart) ++charged_restarts_;
    decision.action = Action::kRestart;
    decision.restart_count = restart_count_;
  } else if (!root_cause_ && membership_change_) {
    decision.action = Action::kRestart;  // nodes joined or left: not a failure, not counted
    decision.restart_count = restart_count_;
    decision.membership_change = true;
  } else {
    decision.action = Action::kFinish;
    decision.restart_count = restart_count_;
    decision.exit_code = (stuck || broken_script) ? kExitNoProgress
                         : root_cause_            ? root_cause_->exit_code
                                                  : 0;
  }
  decision.restarts_charged = charged_restarts_;
  previous_failure_ = root_cause_ && !deliberate_stop_ ? root_cause_ : std::nullopt;
  // The node at fault leaves; a spare takes its seat, or an elastic job does without it.
  if (free_restart && decision.action == Action::kRestart) dismiss_at_fault(out);
  note_decision(decision);
  Outgoing broadcast{{}, decision, false};
  for (const Member& m : members_) {
    if (m.stays()) broadcast.to.push_back(m.id);
  }
  if (!broadcast.to.empty()) out.push_back(std::move(broadcast));
  if (decision.action == Action::kRestart) {
    next_round();
  } else {
    phase_ = Phase::kFinished;
    final_ = decision;
    release_kept_out(decision, out);
    dismiss_spares(decision, out);
  }
}

Classification RendezvousState::classify_round() const {
  if (!root_cause_ || deliberate_stop_) return {FailureClass::kNone, ""};
  return classify_failure(*root_cause_, previous_failure_ ? &*previous_failure_ : nullptr);
}

bool RendezvousState::restart_is_free() const {
  // The node at fault is out of the next round when a spare can take its seat or the job can
  // do without it (an elastic job shrinks). Otherwise a static job restarts on the same nodes
  // (waiting for a lost one to come back), and that restart is counted as any other.
  if (!root_cause_ || root_cause_->node_rank < 0 ||
      root_cause_->node_rank >= static_cast<int>(members_.size()))
    return false;
  if (elastic()) return true;
  // Every seat this round vacates needs a spare: the lost nodes', and the live node at fault.
  int vacated = root_cause_->lost ? 0 : 1;
  for (const Member& m : members_) vacated += (m.lost || m.left) ? 1 : 0;
  return spare_can_take(root_cause_->node_rank) && spares_ready() >= vacated;
}

void RendezvousState::next_round() {
  ++round_;
  round_began_ms_ = now_.wall_ms;
  remember_seats();
  members_.clear();
  member_rank_.clear();
  phase_ = Phase::kJoining;
  membership_change_ = false;
  // Agents that arrived during the round wait in pending_; the join timeout and the last
  // call count from now.
  joining_since_ = now_.steady;
  min_reached_at_.reset();
  if (elastic() && static_cast<int>(pending_.size()) >= settings_.min_nodes)
    min_reached_at_ = now_.steady;
}

void RendezvousState::blame_hang_on_stacks(Decision& decision) {
  std::vector<const RankStack*> stacks;
  const RankStack* hung = nullptr;
  std::unordered_map<const RankStack*, const Member*> reported_by;
  for (const Member& m : members_) {
    for (const RankStack& s : m.stacks) {
      stacks.push_back(&s);
      reported_by[&s] = &m;
      if (s.rank == root_cause_->rank && m.node_rank == root_cause_->node_rank) hung = &s;
    }
  }
  if (stacks.empty()) return;
  if (const auto blame = blame_collectives(stacks)) {
    const Member* culprit = reported_by[blame->culprit];
    root_cause_ = blame_collective_hang(*root_cause_, *blame->culprit, blame->description,
                                        culprit->node.host, culprit->node_rank);
    for (const RankStack* s : blame->odd) decision.odd_ranks.push_back(s->rank);
    return;
  }
  const bool recorded =
      std::any_of(stacks.begin(), stacks.end(), [](const RankStack* s) { return s->recorder; });
  const StackComparison comparison = compare_stacks(stacks);
  const Member* odd_member = comparison.odd.empty() ? nullptr : reported_by[comparison.odd.front()];
  root_cause_ = blame_hang(*root_cause_, comparison, hung,
                           odd_member != nullptr ? odd_member->node.host : root_cause_->host,
                           odd_member != nullptr ? odd_member->node_rank : root_cause_->node_rank);
  if (!recorded) {
    std::string& text = root_cause_->description;
    text = (text + kNoRecorderNote).substr(0, Limits::kMaxText);
  }
  for (const RankStack* s : comparison.odd) decision.odd_ranks.push_back(s->rank);
}

std::vector<Outgoing> RendezvousState::lose_client(ClientId who, const std::string& why) {
  // The node failed when it was last heard from, not when its silence was noticed (up to the
  // heartbeat timeout later): by then its peers' workers may have failed because of it, and
  // the earliest failure is the root cause.
  int64_t last_seen_ms = now_.wall_ms;
  if (const auto client = clients_.find(who); client != clients_.end()) {
    last_seen_ms -=
        std::chrono::duration_cast<milliseconds>(now_.steady - client->second.last_seen).count();
  }
  clients_.erase(who);
  remembered_seat_.erase(who);  // its seat is free for a spare
  if (const auto it = pending_.find(who); it != pending_.end()) {
    if (it->second.join.node_rank) claimed_ranks_.erase(*it->second.join.node_rank);
    pending_.erase(it);
    if (static_cast<int>(pending_.size()) < settings_.min_nodes) min_reached_at_.reset();
  }
  std::vector<Outgoing> out;
  Member* member = member_of(who);
  if (member == nullptr || member->reported ||
      (phase_ != Phase::kRunning && phase_ != Phase::kStopping))
    return out;
  member->reported = true;
  member->lost = true;
  ++reported_;
  note_lost(*member, last_seen_ms);
  FailureReport failure;
  failure.host = member->node.host;
  failure.node_rank = member->node_rank;
  failure.exit_code = kExitRendezvous;
  failure.description = fmt::format("agent lost: {}; last heard from {:.1f} s before", why,
                                    static_cast<double>(now_.wall_ms - last_seen_ms) / 1000.0);
  failure.time_ms = last_seen_ms;
  failure.lost = true;
  record_failure(failure, false, who, out);
  decide_if_complete(out);
  return out;
}

std::vector<Outgoing> RendezvousState::on_disconnect(ClientId who, Now now) {
  now_ = now;
  return lose_client(who, "connection closed");
}

}  // namespace npu_run::rdzv
