#include "rendezvous/state.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>

#include "rendezvous/auth.hpp"

namespace npu_run::rdzv {

namespace {

std::string seat_label(const NodeInfo& node) {
  return fmt::format("{} ({})", node.host, node.addr);
}

int64_t wall_clock_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace

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
  return "?";
}

RendezvousState::RendezvousState(JobSettings settings, Clock::time_point now)
    : settings_(std::move(settings)),
      nonce_source_(random_nonce),
      joining_since_(now),
      next_progress_(now + settings_.progress_interval) {}

Outgoing RendezvousState::reject(ClientId to, std::string code, std::string message) {
  return Outgoing{{to}, ErrorReply{std::move(code), std::move(message)}, true};
}

RendezvousState::Member* RendezvousState::member_of(ClientId id) {
  const auto it = member_rank_.find(id);
  return it == member_rank_.end() ? nullptr : &members_[it->second];
}

std::vector<Outgoing> RendezvousState::on_message(ClientId from, const ClientMessage& message,
                                                  Clock::time_point now) {
  now_ = now;
  Client& client = clients_[from];
  client.last_seen = now;
  if (const auto* auth = std::get_if<Auth>(&message)) return on_auth(from, *auth);
  if (!client.greeted && !std::holds_alternative<Hello>(message)) {
    clients_.erase(from);
    return {
        reject(from, "protocol_order",
               fmt::format("'{}' before the welcome (first 'hello', then 'auth' when the job has a "
                           "token)",
                           message_name(message)))};
  }
  if (const auto* hello = std::get_if<Hello>(&message)) return on_hello(from, *hello);
  if (const auto* join = std::get_if<Join>(&message)) return on_join(from, *join, now);
  if (std::holds_alternative<Heartbeat>(message)) return {Outgoing{{from}, HeartbeatAck{}, false}};
  return on_report(from, std::get<Report>(message));
}

std::vector<Outgoing> RendezvousState::on_hello(ClientId from, const Hello& hello) {
  auto refuse = [&](const char* code, std::string text) {
    clients_.erase(from);
    return std::vector<Outgoing>{reject(from, code, std::move(text))};
  };
  Client& client = clients_[from];
  if (client.greeted || !client.server_nonce.empty())
    return refuse("protocol_order", "'hello' sent twice");
  if (hello.magic != kMagic) {
    return refuse("bad_magic",
                  "this is not an npu_run agent (wrong magic); is another program using the port?");
  }
  if (hello.version != kProtocolVersion) {
    return refuse("version_mismatch",
                  fmt::format("the agent speaks rendezvous protocol {}, this server {}; run the "
                              "same npu_run version on every node",
                              hello.version, kProtocolVersion));
  }
  if (hello.run_id != settings_.run_id) {
    return refuse("run_id_mismatch",
                  fmt::format("the agent's run id '{}' differs from the job's '{}'; give every "
                              "node the same --run-id",
                              hello.run_id, settings_.run_id));
  }
  if (settings_.token.empty() && !hello.nonce.empty()) {
    return refuse("unexpected_token",
                  "the agent has a rendezvous token but this job's server has none; give every "
                  "node the same token (--rdzv-token-file, NPU_RUN_RDZV_TOKEN or --rdzv-token), "
                  "or none to all");
  }
  if (settings_.token.empty()) return {welcome(from)};
  if (hello.nonce.empty()) {
    return refuse("missing_token",
                  "this job needs a rendezvous token and the agent has none; give every node the "
                  "same token (--rdzv-token-file, NPU_RUN_RDZV_TOKEN or --rdzv-token)");
  }
  client.agent_nonce = hello.nonce;
  client.server_nonce = nonce_source_();
  return {Outgoing{
      {from},
      Challenge{client.server_nonce, server_proof(settings_.token, settings_.run_id,
                                                  client.agent_nonce, client.server_nonce)},
      false}};
}

std::vector<Outgoing> RendezvousState::on_auth(ClientId from, const Auth& auth) {
  Client& client = clients_[from];
  if (client.greeted || client.server_nonce.empty()) {
    clients_.erase(from);
    return {reject(from, "protocol_order", "'auth' without an outstanding challenge")};
  }
  const std::string expected =
      agent_proof(settings_.token, settings_.run_id, client.server_nonce, client.agent_nonce);
  if (!proofs_match(expected, auth.proof)) {
    clients_.erase(from);
    return {reject(from, "bad_token",
                   "the agent's rendezvous token differs from the server's (its proof did not "
                   "match); give every node the same token")};
  }
  client.agent_nonce.clear();
  return {welcome(from)};
}

Outgoing RendezvousState::welcome(ClientId to) {
  clients_[to].greeted = true;
  return Outgoing{
      {to},
      Welcome{settings_.heartbeat_interval.count(), settings_.heartbeat_timeout.count()},
      false};
}

bool RendezvousState::awaiting_proof(ClientId id) const {
  const auto it = clients_.find(id);
  return it != clients_.end() && !it->second.greeted && !it->second.server_nonce.empty();
}

bool RendezvousState::authenticated(ClientId id) const {
  const auto it = clients_.find(id);
  return it != clients_.end() && it->second.greeted;
}

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

std::vector<Outgoing> RendezvousState::on_join(ClientId from, const Join& join,
                                               Clock::time_point now) {
  auto refuse = [&](const char* code, std::string text) {
    clients_.erase(from);
    return std::vector<Outgoing>{reject(from, code, std::move(text))};
  };
  const std::string nnodes = settings_.min_nodes == settings_.max_nodes
                                 ? std::to_string(settings_.max_nodes)
                                 : fmt::format("{}:{}", settings_.min_nodes, settings_.max_nodes);
  if (join.min_nodes != settings_.min_nodes || join.max_nodes != settings_.max_nodes) {
    const std::string theirs = join.min_nodes == join.max_nodes
                                   ? std::to_string(join.max_nodes)
                                   : fmt::format("{}:{}", join.min_nodes, join.max_nodes);
    return refuse("nnodes_mismatch",
                  fmt::format("{} has --nnodes {} but the job has --nnodes {}; give every node "
                              "the same --nnodes",
                              seat_label(join.node), theirs, nnodes));
  }
  if (join.max_restarts != settings_.max_restarts) {
    return refuse(
        "max_restarts_mismatch",
        fmt::format("{} has --max-restarts {} but the job has {}; give every node the same value",
                    seat_label(join.node), join.max_restarts, settings_.max_restarts));
  }
  if (pending_.count(from)) return refuse("protocol_order", "'join' sent twice for one round");
  if (phase_ == Phase::kFinished) return refuse("job_finished", "the job has already ended");
  // Elastic: an agent arriving while a round runs waits for the next round if the job has room
  // for it, and a running round re-forms to take it in.
  const bool room_while_running =
      phase_ != Phase::kJoining && elastic() && member_of(from) == nullptr &&
      staying_members() + pending_.size() < static_cast<size_t>(settings_.max_nodes);
  if (!room_while_running &&
      (phase_ != Phase::kJoining || static_cast<int>(pending_.size()) >= settings_.max_nodes)) {
    if (member_of(from) == nullptr) {
      return refuse(
          "job_full",
          fmt::format("the job already has all {} nodes ({}); is {} a node too many, or is "
                      "--nnodes too small?",
                      settings_.max_nodes, describe_seats(), seat_label(join.node)));
    }
    return refuse("protocol_order", "'join' while the round is still running; report first");
  }
  if (join.node_rank) {
    if (*join.node_rank >= settings_.max_nodes) {
      return refuse(
          "node_rank_out_of_range",
          fmt::format(
              "{} claims --node-rank {} but the job has --nnodes {}: node ranks run from 0 to {}",
              seat_label(join.node), *join.node_rank, nnodes, settings_.max_nodes - 1));
    }
    const auto holder = claimed_ranks_.find(*join.node_rank);
    if (holder != claimed_ranks_.end()) {
      return refuse(
          "node_rank_taken",
          fmt::format(
              "{} claims --node-rank {}, which {} already holds; give each node its own rank",
              seat_label(join.node), *join.node_rank,
              seat_label(pending_.at(holder->second).join.node)));
    }
    claimed_ranks_.emplace(*join.node_rank, from);
  }
  if (pending_.empty()) joining_since_ = now;
  pending_.emplace(from, Joiner{from, join, arrivals_++});
  if (room_while_running) {
    std::vector<Outgoing> out;
    if (phase_ == Phase::kRunning) {
      FailureReport why;
      why.host = join.node.host;
      why.description =
          fmt::format("a new agent joined; the job re-forms with {} node(s)",
                      std::min<size_t>(staying_members() + pending_.size(), settings_.max_nodes));
      why.exit_code = 0;
      why.time_ms = wall_clock_ms();
      begin_membership_change(why, out);
    }
    return out;  // otherwise the round is stopping already: the joiner is in the next one
  }
  if (static_cast<int>(pending_.size()) == settings_.max_nodes) return start_round();
  if (elastic() && static_cast<int>(pending_.size()) >= settings_.min_nodes && !min_reached_at_)
    min_reached_at_ = now;
  return {};
}

size_t RendezvousState::staying_members() const {
  size_t n = 0;
  for (const Member& m : members_) n += (m.lost || m.left) ? 0 : 1;
  return n;
}

void RendezvousState::begin_membership_change(const FailureReport& why,
                                              std::vector<Outgoing>& out) {
  if (phase_ != Phase::kRunning) return;
  membership_change_ = true;
  phase_ = Phase::kStopping;
  Outgoing stop{{}, StopWorkers{round_, why}, false};
  for (const Member& m : members_) {
    if (!m.reported) stop.to.push_back(m.id);
  }
  if (!stop.to.empty()) out.push_back(std::move(stop));
}

bool RendezvousState::round_can_start(Clock::time_point now) const {
  const auto joined = static_cast<int>(pending_.size());
  if (joined >= settings_.max_nodes) return true;
  return elastic() && joined >= settings_.min_nodes && min_reached_at_ &&
         now - *min_reached_at_ >= settings_.last_call;
}

std::vector<Outgoing> RendezvousState::start_round() {
  const int n = static_cast<int>(pending_.size());
  // Explicit node ranks stay; the other agents fill the free ranks in (host, arrival) order, so
  // the same cluster gives the same ranks every time.
  std::vector<const Joiner*> by_rank(n, nullptr);
  std::vector<const Joiner*> unranked;
  for (const auto& [id, joiner] : pending_) {
    // An elastic round may have fewer nodes than a claimed rank: that agent gets a free one.
    if (joiner.join.node_rank && *joiner.join.node_rank < n)
      by_rank[*joiner.join.node_rank] = &joiner;
    else
      unranked.push_back(&joiner);
  }
  std::sort(unranked.begin(), unranked.end(), [](const Joiner* a, const Joiner* b) {
    return std::tie(a->join.node.host, a->arrival) < std::tie(b->join.node.host, b->arrival);
  });
  auto next = unranked.begin();
  for (auto& seat : by_rank) {
    if (seat == nullptr) seat = *next++;
  }

  members_.clear();
  member_rank_.clear();
  reported_ = 0;
  int offset = 0;
  bool peers_wanted = false;
  for (int rank = 0; rank < n; ++rank) {
    members_.push_back(Member{by_rank[rank]->id, by_rank[rank]->join.node, rank, offset});
    member_rank_.emplace(by_rank[rank]->id, rank);
    offset += by_rank[rank]->join.node.nproc;
    peers_wanted = peers_wanted || by_rank[rank]->join.want_peers;
  }
  std::vector<PeerInfo> peers;
  if (peers_wanted) {
    for (const Member& m : members_) peers.push_back(PeerInfo{m.node_rank, m.rank_offset, m.node});
  }

  std::vector<Outgoing> out;
  out.reserve(members_.size());
  for (const Member& m : members_) {
    const bool wants = by_rank[m.node_rank]->join.want_peers;
    out.push_back(Outgoing{{m.id},
                           Assigned{round_, restart_count_, m.node_rank, n, offset, m.rank_offset,
                                    members_[0].node.addr, members_[0].node.worker_port,
                                    wants ? peers : std::vector<PeerInfo>{}},
                           false});
  }
  pending_.clear();
  claimed_ranks_.clear();
  root_cause_.reset();
  deliberate_stop_ = false;
  membership_change_ = false;
  min_reached_at_.reset();
  phase_ = Phase::kRunning;
  return out;
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
  std::vector<Outgoing> out;
  const bool by_signal = report.outcome == Outcome::kStopped && report.stop_signal != 0;
  if (by_signal && report.leaving && elastic() && !root_cause_) {
    // A node leaving an elastic job on purpose: the others re-form without it.
    member->left = true;
    FailureReport why;
    why.host = member->node.host;
    why.node_rank = member->node_rank;
    why.exit_code = 0;
    why.description = fmt::format(
        "left the job (npu_run got signal {}); the job re-forms without it", report.stop_signal);
    why.time_ms = wall_clock_ms();
    begin_membership_change(why, out);
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
      failure.exit_code = 128 + report.stop_signal;
    }
    if (failure.time_ms == 0) failure.time_ms = wall_clock_ms();
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
  decision.root_cause = root_cause_;
  if (root_cause_ && !deliberate_stop_ && restart_count_ < settings_.max_restarts) {
    ++restart_count_;
    decision.action = Action::kRestart;
    decision.restart_count = restart_count_;
  } else if (!root_cause_ && membership_change_) {
    decision.action = Action::kRestart;  // nodes joined or left: not a failure, not counted
    decision.restart_count = restart_count_;
    decision.membership_change = true;
  } else {
    decision.action = Action::kFinish;
    decision.restart_count = restart_count_;
    decision.exit_code = root_cause_ ? root_cause_->exit_code : 0;
  }
  Outgoing broadcast{{}, decision, false};
  for (const Member& m : members_) {
    if (!m.lost && !m.left) broadcast.to.push_back(m.id);
  }
  if (!broadcast.to.empty()) out.push_back(std::move(broadcast));
  if (decision.action == Action::kRestart) {
    ++round_;
    members_.clear();
    member_rank_.clear();
    phase_ = Phase::kJoining;
    membership_change_ = false;
    // Agents that arrived during the round wait in pending_; the join timeout and the last
    // call count from now.
    joining_since_ = now_;
    min_reached_at_.reset();
    if (elastic() && static_cast<int>(pending_.size()) >= settings_.min_nodes)
      min_reached_at_ = now_;
  } else {
    phase_ = Phase::kFinished;
    final_ = decision;
  }
}

std::vector<Outgoing> RendezvousState::lose_client(ClientId who, const std::string& why) {
  clients_.erase(who);
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
  FailureReport failure;
  failure.host = member->node.host;
  failure.node_rank = member->node_rank;
  failure.exit_code = kExitRendezvous;
  failure.description = fmt::format("agent lost: {}", why);
  failure.time_ms = wall_clock_ms();
  record_failure(failure, false, who, out);
  decide_if_complete(out);
  return out;
}

std::vector<Outgoing> RendezvousState::on_disconnect(ClientId who, Clock::time_point now) {
  now_ = now;
  return lose_client(who, "connection closed");
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

std::vector<Outgoing> RendezvousState::on_tick(Clock::time_point now) {
  now_ = now;
  std::vector<Outgoing> out;
  std::vector<ClientId> silent;
  for (const auto& [id, client] : clients_) {
    if (now - client.last_seen > settings_.heartbeat_timeout) silent.push_back(id);
  }
  for (ClientId id : silent) {
    const double seconds = std::chrono::duration<double>(settings_.heartbeat_timeout).count();
    out.push_back(reject(id, "heartbeat_timeout",
                         fmt::format("no message from this agent for {:.1f} s", seconds)));
    auto lost = lose_client(id, fmt::format("no heartbeat for {:.1f} s", seconds));
    out.insert(out.end(), std::make_move_iterator(lost.begin()),
               std::make_move_iterator(lost.end()));
  }
  if (phase_ != Phase::kJoining || pending_.empty()) return out;
  if (round_can_start(now)) {
    auto assigned = start_round();
    out.insert(out.end(), std::make_move_iterator(assigned.begin()),
               std::make_move_iterator(assigned.end()));
    return out;
  }

  if (now - joining_since_ > settings_.join_timeout) {
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
    out.push_back(std::move(timeout));
    pending_.clear();
    claimed_ranks_.clear();
    phase_ = Phase::kFinished;
    final_ = Decision{round_, Action::kFinish, restart_count_, kExitRendezvous, std::nullopt};
    return out;
  }
  if (now >= next_progress_) {
    next_progress_ = now + settings_.progress_interval;
    Outgoing progress{
        {},
        Progress{static_cast<int>(pending_.size()), settings_.max_nodes, missing_node_ranks()},
        false};
    for (const auto& [id, joiner] : pending_) progress.to.push_back(id);
    out.push_back(std::move(progress));
  }
  return out;
}

}  // namespace npu_run::rdzv
