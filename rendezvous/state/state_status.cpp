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

NodeStatus RendezvousState::Member::status(int64_t silent_ms, Clock::time_point now) const {
  NodeStatus n;
  n.node_rank = node_rank;
  n.host = node.host;
  n.addr = node.addr;
  n.nproc = node.nproc;
  n.rank_offset = rank_offset;
  n.state = lost ? "lost" : left ? "left" : reported ? "reported" : "running";
  n.silent_ms = lost ? 0 : silent_ms;
  n.ranks = beats;
  n.health = health;
  if (!node.topology.empty()) n.place = node.topology.describe();
  const int64_t since = ms_between(beats_at, now);
  for (RankBeat& b : n.ranks) {
    if (b.age_ms >= 0) b.age_ms += since;  // the beat's age when its heartbeat came, and since
  }
  return n;
}

NodeStatus RendezvousState::Joiner::status(const char* state, int64_t silent_ms) const {
  NodeStatus n;
  n.node_rank = join.node_rank.value_or(-1);
  n.host = join.node.host;
  n.addr = join.node.addr;
  n.nproc = join.node.nproc;
  n.state = state;
  n.health = verdict;
  if (!join.node.topology.empty()) n.place = join.node.topology.describe();
  n.silent_ms = silent_ms;
  return n;
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
    for (const Member& m : members_) s.nodes.push_back(m.status(silent(m.id), now.steady));
  }
  std::vector<const Joiner*> waiting;
  for (const auto& [id, joiner] : pending_) waiting.push_back(&joiner);
  std::sort(waiting.begin(), waiting.end(),
            [](const Joiner* a, const Joiner* b) { return a->arrival < b->arrival; });
  for (const Joiner* j : waiting) {
    const Gate gate = gate_of(*j);
    const char* state = gate == Gate::kChecking ? "checking"
                        : gate == Gate::kFailed ? "excluded"
                        : j->told_standby       ? "spare"
                                                : "waiting";
    s.nodes.push_back(j->status(state, silent(j->id)));
  }
  if (phase_ == Phase::kJoining) {
    const int needed = elastic() ? settings_.min_nodes : settings_.max_nodes;
    s.missing_nodes = std::max(0, needed - static_cast<int>(pending_.size()));
    s.missing_node_ranks = missing_node_ranks();
  }
  return s;
}

}  // namespace npu_run::rdzv
