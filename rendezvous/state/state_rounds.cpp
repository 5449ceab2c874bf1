#include <fmt/format.h>

#include <algorithm>

#include "rendezvous/state/restore_choice.hpp"
#include "rendezvous/state/state.hpp"

namespace npu_run::rdzv {

namespace {

std::string seat_label(const NodeInfo& node) {
  return fmt::format("{} ({})", node.host, node.addr);
}

std::string nnodes_text(int min_nodes, int max_nodes) {
  return min_nodes == max_nodes ? std::to_string(max_nodes)
                                : fmt::format("{}:{}", min_nodes, max_nodes);
}

}  // namespace

std::string RendezvousState::describe_seats() const {
  // Names a few seats, enough to recognise the job; a refusal must not cost O(n) formatting.
  constexpr size_t kShown = 8;
  std::vector<std::string> seats;
  const size_t total = members_.empty() ? pending_.size() : members_.size();
  if (!members_.empty()) {
    for (size_t i = 0; i < members_.size() && seats.size() < kShown; ++i) {
      seats.push_back(
          fmt::format("node {} {}", members_[i].node_rank, seat_label(members_[i].node)));
    }
  } else {
    for (const auto& [id, joiner] : pending_) {
      if (seats.size() == kShown) break;
      seats.push_back(seat_label(joiner.join.node));
    }
  }
  std::string text = fmt::format("{}", fmt::join(seats, ", "));
  if (total > seats.size()) text += fmt::format(" and {} more", total - seats.size());
  return text;
}

std::optional<Outgoing> RendezvousState::ledger_refusal(ClientId from, const Join& join) const {
  // A node that holds a seat re-joins for the next round; only a newcomer is refused.
  if (remembered_seat_.contains(from) || member_rank_.contains(from)) return std::nullopt;
  const auto entry = settings_.ledger.find(join.node.host);
  if (entry == settings_.ledger.end() && !ledgered_hosts_.contains(join.node.host))
    return std::nullopt;
  const std::string what = entry != settings_.ledger.end()
                               ? entry->second
                               : std::string("taken out of this job earlier");
  return reject(from, "ledgered",
                fmt::format("{} is in the ledger of bad nodes ({}): it does not join until the "
                            "entry expires (--ledger-ttl) or is cleared (npu_run ledger clear {})",
                            join.node.host, what, join.node.host));
}

std::optional<Outgoing> RendezvousState::refuse_join(ClientId from, const Join& join) const {
  const std::string nnodes = nnodes_text(settings_.min_nodes, settings_.max_nodes);
  if (join.min_nodes != settings_.min_nodes || join.max_nodes != settings_.max_nodes) {
    return reject(
        from, "nnodes_mismatch",
        fmt::format("{} has --nnodes {} but the job has --nnodes {}; give every node "
                    "the same --nnodes",
                    seat_label(join.node), nnodes_text(join.min_nodes, join.max_nodes), nnodes));
  }
  if (join.spares != settings_.spares) {
    return reject(from, "spares_mismatch",
                  fmt::format("{} has --spares {} but the job has {}; give every node the same "
                              "value",
                              seat_label(join.node), join.spares, settings_.spares));
  }
  if (auto ledgered = ledger_refusal(from, join)) return ledgered;
  if (join.max_restarts != settings_.max_restarts) {
    return reject(
        from, "max_restarts_mismatch",
        fmt::format("{} has --max-restarts {} but the job has {}; give every node the same value",
                    seat_label(join.node), join.max_restarts, settings_.max_restarts));
  }
  if (settings_.check_command && !job_command_.empty() && join.command != job_command_) {
    return reject(
        from, "job_mismatch",
        fmt::format("{} runs '{}' but this job runs '{}': two jobs on one --master-port? Give "
                    "each job its own --master-port; a job whose nodes run different commands "
                    "gives every node the same --rdzv-id",
                    seat_label(join.node), join.command, job_command_));
  }
  if (pending_.count(from))
    return reject(from, "protocol_order", "'join' sent twice for one round");
  if (phase_ == Phase::kFinished) return reject(from, "job_finished", "the job has already ended");
  if (!join.node_rank) return std::nullopt;
  if (*join.node_rank >= settings_.max_nodes + settings_.spares) {
    return reject(
        from, "node_rank_out_of_range",
        fmt::format("{} claims --node-rank {} but the job has --nnodes {}{}: node "
                    "ranks run from 0 to {}",
                    seat_label(join.node), *join.node_rank, nnodes,
                    settings_.spares > 0 ? fmt::format(" and --spares {}", settings_.spares) : "",
                    settings_.max_nodes + settings_.spares - 1));
  }
  const auto holder = claimed_ranks_.find(*join.node_rank);
  if (holder != claimed_ranks_.end()) {
    return reject(
        from, "node_rank_taken",
        fmt::format("{} claims --node-rank {}, which {} already holds; give each node its own rank",
                    seat_label(join.node), *join.node_rank,
                    seat_label(pending_.at(holder->second).join.node)));
  }
  return std::nullopt;
}

std::vector<Outgoing> RendezvousState::on_join(ClientId from, const Join& join) {
  auto refused = [&](Outgoing refusal) {
    clients_.erase(from);
    return std::vector<Outgoing>{std::move(refusal)};
  };
  if (auto refusal = refuse_join(from, join)) return refused(std::move(*refusal));
  // Elastic: an agent arriving while a round runs waits for the next round if the job has room
  // for it, and a running round re-forms to take it in.
  const bool room_while_running =
      phase_ != Phase::kJoining && elastic() && member_of(from) == nullptr &&
      staying_members() + pending_.size() < static_cast<size_t>(settings_.max_nodes);
  // --spares: agents beyond the job's nodes wait as spares, up to that many.
  const size_t agents = (phase_ == Phase::kJoining ? 0 : staying_members()) + pending_.size();
  const bool room_for_spare =
      settings_.spares > 0 && member_of(from) == nullptr &&
      agents < static_cast<size_t>(settings_.max_nodes) + static_cast<size_t>(settings_.spares);
  if (!room_while_running && !room_for_spare &&
      (phase_ != Phase::kJoining || static_cast<int>(pending_.size()) >= settings_.max_nodes)) {
    if (member_of(from) != nullptr)
      return refused(
          reject(from, "protocol_order", "'join' while the round is still running; report first"));
    return refused(reject(
        from, "job_full",
        fmt::format("the job already has all {} nodes ({}){}; is {} a node too many, or is "
                    "--nnodes too small (or --spares)?",
                    settings_.max_nodes, describe_seats(),
                    settings_.spares > 0 ? fmt::format(" and {} spares", settings_.spares) : "",
                    seat_label(join.node))));
  }
  if (join.node_rank) claimed_ranks_.emplace(*join.node_rank, from);
  if (job_command_.empty()) job_command_ = join.command;
  if (pending_.empty()) joining_since_ = now_.steady;
  pending_.emplace(from, Joiner{from, join, arrivals_++}).first->second.joined_ms = now_.wall_ms;
  if (const auto held = resumed_seats_.find(join.agent); held != resumed_seats_.end()) {
    remembered_seat_[from] = held->second;  // its seat under the lost leader
    resumed_seats_.erase(held);
  }
  if (room_while_running) {
    std::vector<Outgoing> out;
    // One that gates on its health checks re-forms the job once they pass (on_health).
    if (phase_ == Phase::kRunning && join.health != HealthMode::kGate) {
      const size_t nodes =
          std::min<size_t>(staying_members() + pending_.size(), settings_.max_nodes);
      begin_reform(Reform{round_, join.node.host, -1,
                          fmt::format("the job re-forms as round {} to add {} ({} nodes)",
                                      round_ + 1, join.node.host, nodes)},
                   out);
    }
    return out;  // otherwise the round is stopping already: the joiner is in the next one
  }
  if (phase_ != Phase::kJoining) {  // a spare arriving while a round runs
    std::vector<Outgoing> out;
    tell_spares(out);
    return out;
  }
  return maybe_start_round();
}

size_t RendezvousState::staying_members() const {
  size_t n = 0;
  for (const Member& m : members_) n += (m.lost || m.left) ? 0 : 1;
  return n;
}

int RendezvousState::seat_members(const std::vector<const Joiner*>& by_rank) {
  members_.clear();
  member_rank_.clear();
  reported_ = 0;
  int offset = 0;
  for (int rank = 0; rank < static_cast<int>(by_rank.size()); ++rank) {
    const Joiner& j = *by_rank[static_cast<size_t>(rank)];
    members_.push_back(Member{j.id, j.join.node, rank, offset});
    members_.back().health = j.verdict;
    members_.back().health_mode = j.join.health;
    members_.back().affinity = j.join.affinity;
    members_.back().agent = j.join.agent;
    member_rank_.emplace(j.id, rank);
    offset += j.join.node.nproc;
  }
  return offset;
}

std::vector<Outgoing> RendezvousState::start_round() {
  pinged_.clear();  // the next round's joiners are pinged again
  const int n = round_seats();
  const std::vector<const Joiner*> by_rank = seat_joiners(n);
  const Blocks blocks = seat_blocks(by_rank);
  if (!blocks.error.empty()) return refuse_placement(blocks.error);
  note_formed(by_rank);
  const int offset = seat_members(by_rank);
  const bool peers_wanted = std::any_of(by_rank.begin(), by_rank.end(),
                                        [](const Joiner* j) { return j->join.want_peers; });
  const RestoreChoice restore = restore_point(by_rank, offset);
  std::vector<CopyPeer> copy_ports;  // by node rank (before the loop below erases the joiners)
  for (int rank = 0; rank < n; ++rank) copy_ports.push_back(copy_peer(by_rank, rank));
  std::vector<PeerInfo> peers;
  if (peers_wanted) {
    for (const Member& m : members_) peers.push_back(PeerInfo{m.node_rank, m.rank_offset, m.node});
  }

  std::vector<Outgoing> out;
  out.reserve(members_.size());
  for (const Member& m : members_) {
    const bool wants = by_rank[m.node_rank]->join.want_peers;
    RestorePoint point = restore.point;
    point.fetch = restore.fetch[static_cast<size_t>(m.node_rank)];
    Assigned assigned{round_,
                      restart_count_,
                      m.node_rank,
                      n,
                      offset,
                      m.rank_offset,
                      members_[0].node.addr,
                      members_[0].node.worker_port,
                      wants ? peers : std::vector<PeerInfo>{},
                      health_notes_,
                      std::move(point),
                      copy_ports[static_cast<size_t>((m.node_rank + 1) % n)]};
    if (settings_.sp_block > 0) assigned.block = blocks.ids[static_cast<size_t>(m.node_rank)];
    assigned.probe_notes = probe_notes_;
    out.push_back(Outgoing{{m.id}, std::move(assigned), false});
    pending_.erase(m.id);
  }
  // Those left wait for the next round: spares, and (elastic) joiners their health gate kept
  // out.
  health_notes_.clear();
  probe_notes_.clear();
  claimed_ranks_.clear();
  for (const auto& [id, joiner] : pending_) {
    if (joiner.join.node_rank) claimed_ranks_.emplace(*joiner.join.node_rank, id);
  }
  root_cause_.reset();
  deliberate_stop_ = false;
  round_progressed_ = false;
  membership_change_ = false;
  min_reached_at_.reset();
  begin_straggler_watch();
  phase_ = Phase::kRunning;
  tell_spares(out);
  return out;
}

Blocks RendezvousState::seat_blocks(const std::vector<const Joiner*>& by_rank) const {
  std::vector<const NodeInfo*> seats;
  seats.reserve(by_rank.size());
  for (const Joiner* j : by_rank) seats.push_back(&j->join.node);
  return cut_blocks(seats, settings_.sp_block);
}

// Nodes that cannot be cut into --sp-block's blocks: no round can form, and none will while
// they stay; the job ends before any worker starts, every agent told why.
std::vector<Outgoing> RendezvousState::refuse_placement(const std::string& why) {
  Outgoing refusal{{}, ErrorReply{"sp_block", why}, true};
  for (const auto& [id, joiner] : pending_) refusal.to.push_back(id);
  note_unseated();
  pending_.clear();
  claimed_ranks_.clear();
  phase_ = Phase::kFinished;
  FailureReport root;
  root.exit_code = kExitRendezvous;
  root.description = why;
  root.time_ms = now_.wall_ms;
  root_cause_ = root;
  final_ = Decision{round_, Action::kFinish, restart_count_, kExitRendezvous, root};
  note_decision(*final_);
  return {std::move(refusal)};
}

RestoreChoice RendezvousState::restore_point(const std::vector<const Joiner*>& by_rank,
                                             int world_size) const {
  std::vector<SeatHolding> seats;
  int offset = 0;
  for (size_t rank = 0; rank < by_rank.size(); ++rank) {
    const Join& join = by_rank[rank]->join;
    seats.push_back(SeatHolding{static_cast<int>(rank), offset, join.node.nproc, join.node.host,
                                join.snapshots ? &*join.snapshots : nullptr, join.node.addr});
    offset += join.node.nproc;
  }
  return choose_restore(seats, world_size);
}

// The copy port of the seat `node_rank`'s agent: the next one in the ring keeps a node's copies.
// None for a node alone (it would be its own), or an agent without one.
CopyPeer RendezvousState::copy_peer(const std::vector<const Joiner*>& by_rank, int node_rank) {
  const Join& join = by_rank[static_cast<size_t>(node_rank)]->join;
  if (by_rank.size() < 2 || !join.snapshots || join.snapshots->copy_port == 0) return {};
  return CopyPeer{join.node.host, join.node.addr, join.snapshots->copy_port};
}

std::vector<int> RendezvousState::missing_node_ranks() const {
  // With automatic ranks nobody knows which ranks are missing.
  if (claimed_ranks_.size() != pending_.size()) return {};
  std::vector<int> missing;
  for (int rank = 0; rank < settings_.max_nodes; ++rank) {
    if (!claimed_ranks_.count(rank)) missing.push_back(rank);
  }
  return missing;
}

std::vector<Outgoing> RendezvousState::time_out_joining() {
  const std::vector<int> missing = missing_node_ranks();
  // Elastic jobs miss nodes up to MIN; which ones nobody can say.
  const int needed = elastic() ? settings_.min_nodes : settings_.max_nodes;
  const std::string who =
      missing.empty() || elastic()
          ? fmt::format("{} more node(s){}", needed - static_cast<int>(pending_.size()),
                        elastic() ? fmt::format(" to reach the minimum of {}", needed) : "")
          : fmt::format("node ranks {}", fmt::join(missing, ", "));
  Outgoing timeout{
      {},
      ErrorReply{
          "rendezvous_timeout",
          fmt::format("only {} of {} nodes joined within {:.0f} s; still missing {} (joined: {})",
                      pending_.size(), settings_.max_nodes,
                      std::chrono::duration<double>(settings_.join_timeout).count(), who,
                      describe_seats())},
      true};
  for (const auto& [id, joiner] : pending_) timeout.to.push_back(id);
  pending_.clear();
  claimed_ranks_.clear();
  phase_ = Phase::kFinished;
  final_ = Decision{round_, Action::kFinish, restart_count_, kExitRendezvous, std::nullopt};
  note_decision(*final_);
  return {std::move(timeout)};
}

std::vector<Outgoing> RendezvousState::on_tick(Now now) {
  now_ = now;
  std::vector<Outgoing> out;
  std::vector<ClientId> silent;
  for (const auto& [id, client] : clients_) {
    if (now.steady - client.last_seen > settings_.heartbeat_timeout) silent.push_back(id);
  }
  for (ClientId id : silent) {
    const double seconds = std::chrono::duration<double>(settings_.heartbeat_timeout).count();
    out.push_back(reject(id, "heartbeat_timeout",
                         fmt::format("no message from this agent for {:.1f} s", seconds)));
    auto lost = lose_client(id, fmt::format("no heartbeat for {:.1f} s", seconds));
    out.insert(out.end(), std::make_move_iterator(lost.begin()),
               std::make_move_iterator(lost.end()));
  }
  for (Outgoing& answer : answer_due_dumps(now)) out.push_back(std::move(answer));
  if (phase_ != Phase::kJoining || pending_.empty()) return out;
  std::vector<Outgoing> more = maybe_start_round();
  if (!more.empty() || phase_ != Phase::kJoining) {
    // started, or ended by the health gate
  } else if (now.steady - joining_since_ > settings_.join_timeout) {
    more = time_out_joining();
  } else if (now.steady >= next_progress_) {
    next_progress_ = now.steady + settings_.progress_interval;
    Outgoing progress{
        {},
        Progress{static_cast<int>(pending_.size()), settings_.max_nodes, missing_node_ranks()},
        false};
    for (const auto& [id, joiner] : pending_) progress.to.push_back(id);
    more.push_back(std::move(progress));
  }
  out.insert(out.end(), std::make_move_iterator(more.begin()), std::make_move_iterator(more.end()));
  return out;
}

}  // namespace npu_run::rdzv
