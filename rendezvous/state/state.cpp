#include "rendezvous/state/state.hpp"

#include <fmt/format.h>

#include "rendezvous/protocol/auth.hpp"

namespace npu_run::rdzv {

Now now() {
  return Now{Clock::now(), std::chrono::duration_cast<milliseconds>(
                               std::chrono::system_clock::now().time_since_epoch())
                               .count()};
}

RendezvousState::RendezvousState(JobSettings settings, Now now)
    : settings_(std::move(settings)),
      nonce_source_(random_nonce),
      now_(now),
      joining_since_(now.steady),
      next_progress_(now.steady + settings_.progress_interval),
      job_command_(settings_.command),
      created_ms_(now.wall_ms),
      round_began_ms_(now.wall_ms) {}

Outgoing RendezvousState::reject(ClientId to, std::string code, std::string message) {
  return Outgoing{{to}, ErrorReply{std::move(code), std::move(message)}, true};
}

RendezvousState::Member* RendezvousState::member_of(ClientId id) {
  const auto it = member_rank_.find(id);
  return it == member_rank_.end() ? nullptr : &members_[it->second];
}

std::vector<Outgoing> RendezvousState::on_message(ClientId from, const ClientMessage& message,
                                                  Now now) {
  now_ = now;
  Client& client = clients_[from];
  client.last_seen = now.steady;
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
  if (const auto* join = std::get_if<Join>(&message)) return on_join(from, *join);
  if (const auto* heartbeat = std::get_if<Heartbeat>(&message)) {
    if (heartbeat->ranks) note_beats(from, *heartbeat->ranks);
    if (heartbeat->etcd) {
      client.etcd_ok_at = *heartbeat->etcd ? std::optional(now.steady) : std::nullopt;
    }
    return {Outgoing{{from}, HeartbeatAck{}, false}};
  }
  // `npu_run status` on a connection of its own, which the answer ends; an agent asking for it
  // stays.
  if (const auto* query = std::get_if<StatusQuery>(&message)) {
    if (query->dump) return on_dump_query(from, *query);
    JobStatus answer = status(now);
    answer.query_id = query->id;
    return {Outgoing{{from}, std::move(answer), !has_joined(from)}};
  }
  // The server itself answers a resume (it moves a session between connections); one that
  // reaches the state machine came where it makes no sense.
  if (std::holds_alternative<Resume>(message)) {
    clients_.erase(from);
    return {reject(from, "protocol_order", "'resume' from an agent that has joined")};
  }
  if (const auto* hang = std::get_if<HangNotice>(&message)) return on_hang_notice(from, *hang);
  if (const auto* health = std::get_if<HealthReport>(&message)) return on_health(from, *health);
  if (const auto* pings = std::get_if<PingReport>(&message)) return on_ping_report(from, *pings);
  if (const auto* probe = std::get_if<ProbeReport>(&message)) return on_probe_report(from, *probe);
  if (const auto* records = std::get_if<RecordsCollected>(&message))
    return on_records(from, *records);
  if (const auto* sample = std::get_if<CollectiveSample>(&message))
    return on_collective_sample(from, *sample);
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
  client.hello_ms = now_.wall_ms;
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

}  // namespace npu_run::rdzv
