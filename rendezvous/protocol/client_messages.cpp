// Messages from agents to the server: encoding, and decoding with every field checked.
#include "rendezvous/protocol/dump_wire.hpp"
#include "rendezvous/protocol/json_fields.hpp"
#include "rendezvous/protocol/protocol.hpp"
#include "rendezvous/protocol/snapshot_wire.hpp"
#include "rendezvous/protocol/straggler_wire.hpp"
#include "rendezvous/protocol/wire_parts.hpp"
#include "rendezvous/protocol/wire_shape.hpp"

namespace npu_run::rdzv {

namespace {

using wire::field;
using wire::Presence;

// ---- the messages declared once (rendezvous/protocol/wire_shape.hpp) ----

const auto kHello = wire::shape<Hello>(
    "hello", field(&Hello::magic, "magic", wire::Text{64}),
    field(&Hello::version, "version", wire::Int<int>{0, 1'000'000}),
    field(&Hello::run_id, "run_id", wire::Text{Limits::kMaxRunId}),
    field(&Hello::nonce, "nonce", wire::Text{Limits::kMaxNonce}, Presence::kOptional),
    field(&Hello::session, "session", wire::Text{Limits::kMaxNonce}, Presence::kOptional));

const auto kAuth =
    wire::shape<Auth>("auth", field(&Auth::proof, "proof", wire::Text{Limits::kMaxNonce}));

const auto kResume =
    wire::shape<Resume>("resume", field(&Resume::session, "session", wire::Text{Limits::kMaxNonce}),
                        field(&Resume::received, "received", wire::Int<uint64_t>{0, INT64_MAX}));

const auto kStatusQuery = wire::shape<StatusQuery>(
    "status", field(&StatusQuery::id, "id", wire::Int<uint64_t>{0, INT64_MAX}),
    field(&StatusQuery::dump, "dump", wire::Bool{}, Presence::kWhenSet));

const auto kHeartbeat = wire::shape<Heartbeat>(
    "heartbeat", field(&Heartbeat::received, "received", wire::Int<uint64_t>{0, INT64_MAX}),
    field(&Heartbeat::ranks, "ranks",
          wire::Maybe<wire::Array<std::vector<RankBeat>>>{
              {Limits::kMaxWorkersPerNode, to_json, beats_from}},
          Presence::kWhenSet),
    field(&Heartbeat::etcd, "etcd", wire::Maybe<wire::Bool>{}, Presence::kWhenSet));

const auto kHangNotice = wire::shape<HangNotice>(
    "hang", field(&HangNotice::round, "round", wire::Int<uint64_t>{0, INT64_MAX}),
    field(&HangNotice::failure, "failure", wire::Object<FailureReport>{to_json, failure_from}));

const auto kHealthReport = wire::shape<HealthReport>(
    "health", field(&HealthReport::verdict, "verdict",
                    wire::Object<NodeVerdict>{verdict_json, verdict_from}));

const auto kPingReport = wire::shape<PingReport>(
    "ping_report", field(&PingReport::run, "run", wire::Int<uint64_t>{0, INT64_MAX}),
    field(&PingReport::results, "results",
          wire::Array<std::vector<PingResult>>{Limits::kMaxPings, to_json, ping_results_from},
          Presence::kOptional));

const auto kProbeReport = wire::shape<ProbeReport>(
    "probe_report", field(&ProbeReport::run, "run", wire::Int<uint64_t>{0, INT64_MAX}),
    field(&ProbeReport::matmul_us, "matmul_us", wire::Int<int64_t>{0, INT64_MAX}),
    field(&ProbeReport::gather_us, "gather_us", wire::Int<int64_t>{0, INT64_MAX}),
    field(&ProbeReport::failed, "failed", wire::Bool{}, Presence::kOptional),
    field(&ProbeReport::detail, "detail", wire::Text{Limits::kMaxPingText}, Presence::kOptional));

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
          return kHello.encode(m);
        } else if constexpr (std::is_same_v<T, Auth>) {
          return kAuth.encode(m);
        } else if constexpr (std::is_same_v<T, Join>) {
          return join_json(m);
        } else if constexpr (std::is_same_v<T, Heartbeat>) {
          return kHeartbeat.encode(m);
        } else if constexpr (std::is_same_v<T, StatusQuery>) {
          return kStatusQuery.encode(m);
        } else if constexpr (std::is_same_v<T, RecordsCollected>) {
          return records_json(m);
        } else if constexpr (std::is_same_v<T, Resume>) {
          return kResume.encode(m);
        } else if constexpr (std::is_same_v<T, HangNotice>) {
          return kHangNotice.encode(m);
        } else if constexpr (std::is_same_v<T, HealthReport>) {
          return kHealthReport.encode(m);
        } else if constexpr (std::is_same_v<T, PingReport>) {
          return kPingReport.encode(m);
        } else if constexpr (std::is_same_v<T, CollectiveSample>) {
          return sample_json(m);
        } else if constexpr (std::is_same_v<T, ProbeReport>) {
          return kProbeReport.encode(m);
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
  if (type == "hello") return kHello.decode(f);
  if (type == "auth") return kAuth.decode(f);
  if (type == "join") return join_from(f);
  if (type == "heartbeat") return kHeartbeat.decode(f);
  if (type == "status") return kStatusQuery.decode(f);
  if (type == "records") return records_from(f);
  if (type == "resume") return kResume.decode(f);
  if (type == "hang") return kHangNotice.decode(f);
  if (type == "health") return kHealthReport.decode(f);
  if (type == "ping_report") return kPingReport.decode(f);
  if (type == "sample") return sample_from(f);
  if (type == "probe_report") return kProbeReport.decode(f);
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
