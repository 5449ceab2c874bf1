// Seats and spares (--spares): which joiners get which node rank, and who waits as a spare.
// A seat is kept from round to round by the agent that held it, so a node's loss moves no other
// rank; a vacated seat goes to a spare, preferably one with the lost node's affinity and its
// worker count; joiners beyond the round's seats stand by. A node at fault is taken out (its
// agent dismissed) when a spare or an elastic job can do without it, and every node taken out
// is recorded for the ledger of bad nodes.
#include <fmt/format.h>

#include <algorithm>
#include <tuple>

#include "rendezvous/state/state.hpp"

namespace npu_run::rdzv {

bool RendezvousState::seat_candidate(const Joiner& joiner) const {
  if (gate_of(joiner) != Gate::kReady) return false;
  // Named spares (--node-rank at or beyond --nnodes) stand by from the start: the first round
  // waits for the nodes themselves, unless one of them failed its health gate.
  const bool named_spare = joiner.join.node_rank && *joiner.join.node_rank >= settings_.max_nodes;
  return !(named_spare && round_ == 0 && !spares_fill_failed_);
}

int RendezvousState::kept_seat(const Joiner& joiner, int seats) const {
  if (const auto it = remembered_seat_.find(joiner.id); it != remembered_seat_.end())
    return it->second < seats ? it->second : -1;
  if (joiner.join.node_rank && *joiner.join.node_rank < seats) return *joiner.join.node_rank;
  return -1;
}

std::vector<const RendezvousState::Joiner*> RendezvousState::seat_joiners(int seats) const {
  std::vector<const Joiner*> by_rank(seats, nullptr);
  std::vector<const Joiner*> free;
  // Held seats first (they never move), then explicit node ranks; a clash leaves the later one
  // to the free joiners.
  for (const bool remembered : {true, false}) {
    for (const auto& [id, joiner] : pending_) {
      if (!seat_candidate(joiner) || remembered != remembered_seat_.contains(id)) continue;
      const int seat = kept_seat(joiner, seats);
      if (seat >= 0 && by_rank[seat] == nullptr)
        by_rank[seat] = &joiner;
      else
        free.push_back(&joiner);
    }
  }
  // Named spares (--node-rank at or beyond --nnodes) last, the others in --node-order, so the
  // same cluster gives the same ranks every time.
  std::sort(free.begin(), free.end(), [&](const Joiner* a, const Joiner* b) {
    const bool a_spare = a->join.node_rank && *a->join.node_rank >= settings_.max_nodes;
    const bool b_spare = b->join.node_rank && *b->join.node_rank >= settings_.max_nodes;
    if (a_spare != b_spare) return b_spare;
    return seated_before(settings_.node_order, {&a->join.node, a->arrival},
                         {&b->join.node, b->arrival});
  });
  for (int seat = 0; seat < seats; ++seat) {
    if (by_rank[seat] != nullptr || free.empty()) continue;
    const auto chosen = best_spare_for(seat, free);
    by_rank[seat] = *chosen;
    free.erase(chosen);
  }
  return by_rank;
}

std::vector<const RendezvousState::Joiner*>::iterator RendezvousState::best_spare_for(
    int seat, std::vector<const Joiner*>& free) const {
  if (seat >= static_cast<int>(last_seats_.size())) return free.begin();
  // The seat's last holder: a spare with its worker count keeps the rank table's shape; among
  // those, one with its affinity (the user's word), then the one nearest it in the network (the
  // most levels of its topology path in common: its SuperPoD, block, switches); failing all, the
  // first in order.
  const SeatMemory& last = last_seats_[seat];
  const std::vector<std::string> lost_levels = last.place.levels();
  const auto nearness = [&](const Joiner* j) {
    const std::vector<std::string> levels = j->join.node.topology.levels();
    size_t common = 0;
    for (size_t i = 0; i < levels.size() && i < lost_levels.size(); ++i) {
      if (levels[i] != lost_levels[i]) break;
      common += levels[i].empty() ? 0 : 1;  // a level neither knows says nothing
    }
    const bool affine = !last.affinity.empty() && j->join.affinity == last.affinity;
    return std::tuple(j->join.node.nproc == last.nproc, affine, common);
  };
  auto best = free.begin();
  for (auto it = free.begin(); it != free.end(); ++it) {
    if (nearness(*best) < nearness(*it)) best = it;
  }
  return best;
}

int RendezvousState::seat_candidates() const {
  return static_cast<int>(std::count_if(pending_.begin(), pending_.end(),
                                        [&](const auto& p) { return seat_candidate(p.second); }));
}

int RendezvousState::round_seats() const {
  return std::min(seat_candidates(), settings_.max_nodes);
}

int RendezvousState::spares_ready() const {
  return static_cast<int>(std::count_if(pending_.begin(), pending_.end(), [](const auto& p) {
    return gate_of(p.second) == Gate::kReady;
  }));
}

int RendezvousState::spares_waiting() const {
  return phase_ == Phase::kJoining ? 0 : spares_ready();
}

void RendezvousState::tell_spares(std::vector<Outgoing>& out) {
  if (settings_.spares == 0) return;
  const int waiting = spares_waiting();
  for (auto& [id, joiner] : pending_) {
    if (joiner.told_standby || gate_of(joiner) != Gate::kReady) continue;
    joiner.told_standby = true;
    out.push_back(
        Outgoing{{id}, Standby{round_, static_cast<int>(members_.size()), waiting}, false});
  }
}

void RendezvousState::remember_seats() {
  last_seats_.clear();
  remembered_seat_.clear();
  for (const Member& m : members_) {
    last_seats_.push_back(
        SeatMemory{m.node.host, m.affinity, m.node.nproc, m.agent, m.node.topology});
    if (m.stays()) remembered_seat_.emplace(m.id, m.node_rank);
  }
}

bool RendezvousState::awaiting_seat_holders() const {
  return std::any_of(remembered_seat_.begin(), remembered_seat_.end(),
                     [&](const auto& seat) { return !pending_.contains(seat.first); });
}

bool RendezvousState::spare_can_take(int node_rank) const {
  for (const auto& [id, joiner] : pending_) {
    if (gate_of(joiner) == Gate::kReady &&
        (node_rank < 0 || node_rank >= static_cast<int>(members_.size()) ||
         joiner.join.node.nproc == members_[node_rank].node.nproc))
      return true;
  }
  return false;
}

void RendezvousState::take_out(ClientId who, const NodeInfo& node, int node_rank,
                               const std::string& reason, const std::string& evidence) {
  // A host that runs another node of the job (several agents on one machine: a test, or an
  // agent restarted by hand) is not what failed.
  for (const Member& m : members_) {
    if (m.id != who && !m.lost && !m.taken_out && m.node.host == node.host) return;
  }
  for (const auto& [id, joiner] : pending_) {
    if (id != who && joiner.join.node.host == node.host) return;
  }
  TakenOut entry{node.host, node.addr, node_rank, now_.wall_ms, reason, evidence};
  if (taken_out_.size() < kMaxTakenOutKept) taken_out_.push_back(std::move(entry));
  ledgered_hosts_.insert(node.host);
}

void RendezvousState::dismiss_at_fault(std::vector<Outgoing>& out) {
  Member& m = members_[root_cause_->node_rank];
  if (m.left) return;  // gone on purpose: not known to be bad, and told nothing more
  take_out(
      m.id, m.node, m.node_rank, m.lost ? "lost" : "infrastructure fault",
      root_cause_->evidence.fault.empty() ? root_cause_->description : root_cause_->evidence.fault);
  if (m.lost) return;
  m.taken_out = true;
  const bool spare = spare_can_take(m.node_rank);
  out.push_back(Outgoing{
      {m.id},
      Dismissed{
          fmt::format("node {} ({}) is taken out of the job: {}; {}", m.node_rank, m.node.host,
                      root_cause_->evidence.fault.empty() ? root_cause_->description
                                                          : root_cause_->evidence.fault,
                      spare ? "a spare takes its seat" : "the job goes on without it"),
          0},
      true});
}

void RendezvousState::dismiss_spares(const Decision& decision, std::vector<Outgoing>& out) {
  for (auto it = pending_.begin(); it != pending_.end();) {
    if (gate_of(it->second) != Gate::kReady) {
      ++it;
      continue;
    }
    out.push_back(Outgoing{
        {it->first},
        Dismissed{
            fmt::format("the job ended (exit {}) without needing this spare", decision.exit_code),
            0},
        true});
    it = pending_.erase(it);
  }
}

std::vector<TakenOut> RendezvousState::take_taken_out() {
  return std::exchange(taken_out_, {});
}

}  // namespace npu_run::rdzv
