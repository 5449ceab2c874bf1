// Messages from agents to the server: encoding, and decoding with every field checked.
#include "rendezvous/protocol/dump_wire.hpp"
#include "rendezvous/protocol/json_fields.hpp"
#include "rendezvous/protocol/protocol.hpp"
#include "rendezvous/protocol/snapshot_wire.hpp"
#include "rendezvous/protocol/straggler_wire.hpp"
#include "rendezvous/protocol/wire_parts.hpp"

namespace npu_run::rdzv {

namespace {

// A node's own event: the server knows its node, host and round.
json agent_event_json(const TimelineEvent& e) {
  json j{{"rank", e.rank}, {"phase", phase_name(e.phase)}, {"time", e.time_ms}};
  if (e.step >= 0) j["step"] = e.step;
  if (!e.detail.empty()) j["detail"] = e.detail;
  return j;
}

TimelineEvent agent_event_from(const json& j) {
  const Fields f(j, "timeline event");
  TimelineEvent e;
  e.rank = static_cast<int>(f.integer("rank", -1, Limits::kMaxNodes * int64_t{64}));
  const std::string phase = f.text("phase", 32);
  const auto known = phase_from(phase);
  if (!known) f.fail(fmt::format("has an unknown phase '{}'", phase));
  e.phase = *known;
  e.time_ms = f.integer("time", 0, INT64_MAX);
  e.step = f.optional_integer("step", 0, INT64_MAX).value_or(-1);
  e.detail = f.text("detail", kMaxDetail, false);
  return e;
}

json join_json(const Join& m) {
  json j{{"type", "join"},
         {"node", to_json(m.node)},
         {"min_nodes", m.min_nodes},
         {"max_nodes", m.max_nodes},
         {"max_restarts", m.max_restarts},
         {"want_peers", m.want_peers},
         {"command", m.command},
         {"health", health_mode_name(m.health)}};
  if (m.node_rank) j["node_rank"] = *m.node_rank;
  if (m.spares > 0) j["spares"] = m.spares;
  if (!m.affinity.empty()) j["affinity"] = m.affinity;
  if (!m.agent.empty()) j["agent"] = m.agent;
  if (m.started_ms > 0) j["started_ms"] = m.started_ms;
  if (m.dialled_ms > 0) j["dialled_ms"] = m.dialled_ms;
  if (m.dials > 1) j["dials"] = m.dials;
  if (m.snapshots) j["snapshots"] = held_json(*m.snapshots);
  return j;
}

json report_json(const Report& m) {
  json j{{"type", "report"},          {"round", m.round},
         {"outcome", m.outcome},      {"stop_signal", m.stop_signal},
         {"fatal", m.fatal},          {"leaving", m.leaving},
         {"progressed", m.progressed}};
  if (m.failure) j["failure"] = to_json(*m.failure);
  if (!m.stacks.empty()) {
    json stacks = json::array();
    for (const RankStack& stack : m.stacks) stacks.push_back(to_json(stack));
    j["stacks"] = std::move(stacks);
  }
  if (!m.timeline.empty()) {
    json events = json::array();
    for (const TimelineEvent& e : m.timeline) events.push_back(agent_event_json(e));
    j["timeline"] = std::move(events);
  }
  return j;
}

json client_json(const ClientMessage& message) {
  return std::visit(
      [](const auto& m) -> json {
        using T = std::decay_t<decltype(m)>;
        if constexpr (std::is_same_v<T, Hello>) {
          return {{"type", "hello"},    {"magic", m.magic}, {"version", m.version},
                  {"run_id", m.run_id}, {"nonce", m.nonce}, {"session", m.session}};
        } else if constexpr (std::is_same_v<T, Auth>) {
          return {{"type", "auth"}, {"proof", m.proof}};
        } else if constexpr (std::is_same_v<T, Join>) {
          return join_json(m);
        } else if constexpr (std::is_same_v<T, Heartbeat>) {
          json j{{"type", "heartbeat"}, {"received", m.received}};
          if (m.ranks) j["ranks"] = to_json(*m.ranks);
          if (m.etcd) j["etcd"] = *m.etcd;
          return j;
        } else if constexpr (std::is_same_v<T, StatusQuery>) {
          json j{{"type", "status"}, {"id", m.id}};
          if (m.dump) j["dump"] = true;
          return j;
        } else if constexpr (std::is_same_v<T, RecordsCollected>) {
          return records_json(m);
        } else if constexpr (std::is_same_v<T, Resume>) {
          return {{"type", "resume"}, {"session", m.session}, {"received", m.received}};
        } else if constexpr (std::is_same_v<T, HangNotice>) {
          return {{"type", "hang"}, {"round", m.round}, {"failure", to_json(m.failure)}};
        } else if constexpr (std::is_same_v<T, HealthReport>) {
          return {{"type", "health"}, {"verdict", verdict_json(m.verdict)}};
        } else if constexpr (std::is_same_v<T, PingReport>) {
          return {{"type", "ping_report"}, {"run", m.run}, {"results", to_json(m.results)}};
        } else if constexpr (std::is_same_v<T, CollectiveSample>) {
          return sample_json(m);
        } else if constexpr (std::is_same_v<T, ProbeReport>) {
          return {{"type", "probe_report"},   {"run", m.run},       {"matmul_us", m.matmul_us},
                  {"gather_us", m.gather_us}, {"failed", m.failed}, {"detail", m.detail}};
        } else {
          return report_json(m);
        }
      },
      message);
}

Join join_from(const Fields& f) {
  Join m;
  m.node = node_from(f.object("node"));
  if (auto r = f.optional_integer("node_rank", 0, Limits::kMaxNodes))
    m.node_rank = static_cast<int>(*r);
  m.min_nodes = static_cast<int>(f.integer("min_nodes", 1, Limits::kMaxNodes));
  m.max_nodes = static_cast<int>(f.integer("max_nodes", 1, Limits::kMaxNodes));
  m.max_restarts = static_cast<int>(f.integer("max_restarts", 0, 1'000'000));
  m.want_peers = f.boolean("want_peers");
  m.command = f.text("command", Limits::kMaxText, false);
  const std::string health = f.text("health", 8, false);
  m.health = health.empty() ? HealthMode::kOff : health_mode_from(health);
  m.spares = static_cast<int>(f.optional_integer("spares", 0, Limits::kMaxNodes).value_or(0));
  m.affinity = f.text("affinity", Limits::kMaxName, false);
  m.agent = f.text("agent", Limits::kMaxName, false);
  m.started_ms = f.optional_integer("started_ms", 0, INT64_MAX).value_or(0);
  m.dialled_ms = f.optional_integer("dialled_ms", 0, INT64_MAX).value_or(0);
  m.dials = static_cast<int>(f.optional_integer("dials", 1, 1'000'000).value_or(1));
  if (const json* held = f.find("snapshots")) m.snapshots = held_from(*held);
  return m;
}

ProbeReport probe_report_from(const Fields& f) {
  ProbeReport m;
  m.run = static_cast<uint64_t>(f.integer("run", 0, INT64_MAX));
  m.matmul_us = f.integer("matmul_us", 0, INT64_MAX);
  m.gather_us = f.integer("gather_us", 0, INT64_MAX);
  m.failed = f.boolean("failed");
  m.detail = f.text("detail", Limits::kMaxPingText, false);
  return m;
}

Report report_from(const Fields& f) {
  Report m;
  m.round = static_cast<uint64_t>(f.integer("round", 0, INT64_MAX));
  m.outcome = enum_field<Outcome>(f, "outcome");
  if (f.find("failure") != nullptr) m.failure = failure_from(f.object("failure"));
  m.stop_signal = static_cast<int>(f.optional_integer("stop_signal", 0, 64).value_or(0));
  m.fatal = f.boolean("fatal");
  m.leaving = f.boolean("leaving");
  m.progressed = f.find("progressed") == nullptr || f.boolean("progressed");
  for (const json& stack : f.array("stacks", Limits::kMaxWorkersPerNode, false))
    m.stacks.push_back(stack_from(stack));
  for (const json& event : f.array("timeline", Limits::kMaxReportEvents, false))
    m.timeline.push_back(agent_event_from(event));
  if (m.outcome == Outcome::kFailed && !m.failure)
    f.fail("reports a failure without describing it");
  return m;
}

ClientMessage client_from(const json& j) {
  const Fields f(j, "message");
  const std::string type = f.text("type", 32);
  if (type == "hello") {
    return Hello{f.text("magic", 64), static_cast<int>(f.integer("version", 0, 1'000'000)),
                 f.text("run_id", Limits::kMaxRunId), f.text("nonce", Limits::kMaxNonce, false),
                 f.text("session", Limits::kMaxNonce, false)};
  }
  if (type == "auth") return Auth{f.text("proof", Limits::kMaxNonce)};
  if (type == "join") return join_from(f);
  if (type == "heartbeat") {
    Heartbeat m{received_field(f)};
    if (f.find("ranks") != nullptr)
      m.ranks = beats_from(f.array("ranks", Limits::kMaxWorkersPerNode));
    if (f.find("etcd") != nullptr) m.etcd = f.boolean("etcd");
    return m;
  }
  if (type == "status") {
    return StatusQuery{static_cast<uint64_t>(f.integer("id", 0, INT64_MAX)),
                       f.find("dump") != nullptr && f.boolean("dump")};
  }
  if (type == "records") return records_from(f);
  if (type == "resume") return Resume{f.text("session", Limits::kMaxNonce), received_field(f)};
  if (type == "hang") {
    HangNotice m;
    m.round = static_cast<uint64_t>(f.integer("round", 0, INT64_MAX));
    m.failure = failure_from(f.object("failure"));
    return m;
  }
  if (type == "health") return HealthReport{verdict_from(f.object("verdict"))};
  if (type == "ping_report")
    return PingReport{static_cast<uint64_t>(f.integer("run", 0, INT64_MAX)),
                      ping_results_from(f.array("results", Limits::kMaxPings, false))};
  if (type == "sample") return sample_from(f);
  if (type == "probe_report") return probe_report_from(f);
  if (type == "report") return report_from(f);
  f.fail(fmt::format("has an unknown type '{}'", type));
}

}  // namespace

std::string encode(const ClientMessage& message) {
  return dump(client_json(message));
}

std::variant<ClientMessage, ProtocolError> decode_client_message(std::string_view json_text) {
  return decode_json<ClientMessage>(json_text, client_from);
}

}  // namespace npu_run::rdzv
