// What `npu_run status` asks of the state machine: the job as it stands, and the ranks'
// progress beats each agent sends with its heartbeats.
#include <algorithm>

#include "rendezvous/state/state.hpp"

namespace npu_run::rdzv {
namespace {

const char* phase_name(RendezvousState::Phase phase) {
  switch (phase) {
    case RendezvousState::Phase::kJoining:
      return "joining";
    case RendezvousState::Phase::kRunning:
      return "running";
    case RendezvousState::Phase::kStopping:
      return "stopping";
    case RendezvousState::Phase::kFinished:
      return "finished";
  }
  return "unknown";
}

int64_t ms_between(Clock::time_point from, Clock::time_point to) {
  return std::max<int64_t>(0, std::chrono::duration_cast<milliseconds>(to - from).count());
}

}  // namespace

void RendezvousState::note_beats(ClientId from, const std::vector<RankBeat>& ranks) {
  Member* member = member_of(from);
  if (member == nullptr) return;  // only the running round's nodes have ranks
  member->beats.clear();
  // Its own ranks only, each once: what a peer sends is bounded by its seat (and checked in
  // one pass: a heartbeat may list 4,096 ranks).
  std::vector<bool> seen(static_cast<size_t>(member->node.nproc));
  for (const RankBeat& beat : ranks) {
    if (beat.local_rank >= member->node.nproc || seen[static_cast<size_t>(beat.local_rank)])
      continue;
    seen[static_cast<size_t>(beat.local_rank)] = true;
    member->beats.push_back(beat);
  }
  member->beats_at = now_.steady;
}

JobStatus RendezvousState::status(Now now) const {
  JobStatus s;
  s.run_id = settings_.run_id;
  s.phase = phase_name(phase_);
  s.round = round_;
  s.restart_count = restart_count_;
  s.max_restarts = settings_.max_restarts;
  s.min_nodes = settings_.min_nodes;
  s.max_nodes = settings_.max_nodes;
  s.root_cause = root_cause_;
  if (!blames_.empty()) s.blame = blames_.back().sentence;
  s.straggler = straggler_status();
  auto silent = [&](ClientId id) {
    const auto it = clients_.find(id);
    return it == clients_.end() ? 0 : ms_between(it->second.last_seen, now.steady);
  };
  if (phase_ != Phase::kJoining) {
    for (const Member& m : members_) {
      NodeStatus& n = s.nodes.emplace_back();
      n.node_rank = m.node_rank;
      n.host = m.node.host;
      n.addr = m.node.addr;
      n.nproc = m.node.nproc;
      n.rank_offset = m.rank_offset;
      n.state = m.lost ? "lost" : m.left ? "left" : m.reported ? "reported" : "running";
      n.silent_ms = m.lost ? 0 : silent(m.id);
      n.ranks = m.beats;
      n.health = m.health;
      if (!m.node.topology.empty()) n.place = m.node.topology.describe();
      const int64_t since = ms_between(m.beats_at, now.steady);
      for (RankBeat& b : n.ranks) {
        if (b.age_ms >= 0) b.age_ms += since;
      }
    }
  }
  std::vector<const Joiner*> waiting;
  for (const auto& [id, joiner] : pending_) waiting.push_back(&joiner);
  std::sort(waiting.begin(), waiting.end(),
            [](const Joiner* a, const Joiner* b) { return a->arrival < b->arrival; });
  for (const Joiner* j : waiting) {
    NodeStatus& n = s.nodes.emplace_back();
    n.node_rank = j->join.node_rank.value_or(-1);
    n.host = j->join.node.host;
    n.addr = j->join.node.addr;
    n.nproc = j->join.node.nproc;
    const Gate gate = gate_of(*j);
    n.state = gate == Gate::kChecking ? "checking"
              : gate == Gate::kFailed ? "excluded"
              : j->told_standby       ? "spare"
                                      : "waiting";
    n.health = j->verdict;
    if (!j->join.node.topology.empty()) n.place = j->join.node.topology.describe();
    n.silent_ms = silent(j->id);
  }
  if (phase_ == Phase::kJoining) {
    const int needed = elastic() ? settings_.min_nodes : settings_.max_nodes;
    s.missing_nodes = std::max(0, needed - static_cast<int>(pending_.size()));
    s.missing_node_ranks = missing_node_ranks();
  }
  return s;
}

}  // namespace npu_run::rdzv
