// Stragglers during the run (rendezvous/state/straggler_desk.hpp): the running round's samples, the
// straggler named in the log, the timeline and `npu_run status`, and with --straggler replace its
// node's seat handed to a ready spare.
#include <fmt/format.h>

#include "rendezvous/state/state.hpp"

namespace npu_run::rdzv {

void RendezvousState::begin_straggler_watch() {
  straggler_to_replace_.reset();
  if (settings_.straggler.mode == StragglerMode::kOff) return stragglers_.stop();
  std::vector<int> offsets;
  std::vector<std::string> hosts;
  int world = 0;
  for (const Member& m : members_) {
    offsets.push_back(m.rank_offset);
    hosts.push_back(m.node.host);
    world = m.rank_offset + m.node.nproc;
  }
  stragglers_.begin(round_, std::move(offsets), std::move(hosts), world,
                    settings_.straggler.window.count(), now_.wall_ms);
}

std::vector<Outgoing> RendezvousState::on_collective_sample(ClientId from,
                                                            const CollectiveSample& sample) {
  const Member* member = member_of(from);
  // Unsequenced and sampled: one from a round that ended, or a node that stopped, is dropped.
  if (member == nullptr || phase_ != Phase::kRunning || member->reported) return {};
  stragglers_.add(member->node_rank, sample);
  std::vector<Outgoing> out;
  if (auto named = stragglers_.score_if_due(now_.wall_ms)) {
    TimelineEvent e = job_event(TimelinePhase::kStraggler, named->node_rank,
                                named->node_rank >= 0 ? members_[named->node_rank].node.host : "");
    e.rank = named->rank;
    e.detail = named->text;
    timeline_.add(std::move(e));
    straggler_news_ = named;
    if (settings_.straggler.mode == StragglerMode::kReplace && named->node_rank >= 0)
      straggler_to_replace_ = named;
  }
  // A straggler waits for a spare until one is ready, or until a window clears it.
  if (straggler_to_replace_ && !stragglers_.current()) straggler_to_replace_.reset();
  if (straggler_to_replace_ && replace_straggler(*straggler_to_replace_, out))
    straggler_to_replace_.reset();
  return out;
}

bool RendezvousState::replace_straggler(const NamedStraggler& named, std::vector<Outgoing>& out) {
  if (phase_ != Phase::kRunning || root_cause_ || named.node_rank < 0 ||
      named.node_rank >= static_cast<int>(members_.size()) || !spare_can_take(named.node_rank) ||
      spares_ready() < 1)
    return false;
  const Member& m = members_[named.node_rank];
  FailureReport failure;
  failure.host = m.node.host;
  failure.node_rank = m.node_rank;
  failure.exit_code = 1;
  failure.description = "a straggler: " + named.text;
  failure.evidence.fault = failure.description;  // the node's fault: a spare takes its seat
  failure.time_ms = now_.wall_ms;
  // Every node stops, the straggler too; the decision takes it out (dismiss_at_fault).
  record_failure(failure, false, 0, out);
  return true;
}

std::optional<StragglerStatus> RendezvousState::straggler_status() const {
  const auto& named = stragglers_.current();
  if (!named || phase_ != Phase::kRunning) return std::nullopt;
  StragglerStatus s;
  s.node_rank = named->node_rank;
  s.rank = named->rank;
  if (named->node_rank >= 0 && named->node_rank < static_cast<int>(members_.size()))
    s.host = members_[named->node_rank].node.host;
  s.share = std::min(1.0, named->score.share);
  s.cost_ms = named->score.cost_ms;
  s.text = named->text;
  return s;
}

}  // namespace npu_run::rdzv
