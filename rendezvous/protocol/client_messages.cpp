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

const auto kJoin = wire::shape<Join>(
    "join", field(&Join::node, "node", wire::Object<NodeInfo>{to_json, node_from}),
    field(&Join::node_rank, "node_rank", wire::Maybe<wire::Int<int>>{{0, Limits::kMaxNodes}},
          Presence::kWhenSet),
    field(&Join::min_nodes, "min_nodes", wire::Int<int>{1, Limits::kMaxNodes}),
    field(&Join::max_nodes, "max_nodes", wire::Int<int>{1, Limits::kMaxNodes}),
    field(&Join::max_restarts, "max_restarts", wire::Int<int>{0, 1'000'000}),
    field(&Join::want_peers, "want_peers", wire::Bool{}, Presence::kOptional),
    field(&Join::command, "command", wire::Text{Limits::kMaxText}, Presence::kOptional),
    field(&Join::health, "health", wire::Named<HealthMode>{8, health_mode_name, health_mode_from},
          Presence::kOptional),
    field(&Join::spares, "spares", wire::Int<int>{0, Limits::kMaxNodes}, Presence::kWhenSet),
    field(&Join::affinity, "affinity", wire::Text{Limits::kMaxName}, Presence::kWhenSet),
    field(&Join::agent, "agent", wire::Text{Limits::kMaxName}, Presence::kWhenSet),
    field(&Join::started_ms, "started_ms", wire::Int<int64_t>{0, INT64_MAX}, Presence::kWhenSet),
    field(&Join::dialled_ms, "dialled_ms", wire::Int<int64_t>{0, INT64_MAX}, Presence::kWhenSet),
    field(&Join::dials, "dials", wire::Int<int>{1, 1'000'000}, Presence::kWhenSet),
    field(&Join::snapshots, "snapshots",
          wire::Maybe<wire::Object<HeldSnapshots>>{{held_json, held_from}}, Presence::kWhenSet));

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

const auto kReport =
    wire::shape<Report>(
        "report", field(&Report::round, "round", wire::Int<uint64_t>{0, INT64_MAX}),
        field(&Report::outcome, "outcome", wire::Enum<Outcome>{}),
        field(&Report::failure, "failure",
              wire::Maybe<wire::Object<FailureReport>>{{to_json, failure_from}},
              Presence::kWhenSet),
        field(&Report::stop_signal, "stop_signal", wire::Int<int>{0, 64}, Presence::kOptional),
        field(&Report::fatal, "fatal", wire::Bool{}, Presence::kOptional),
        field(&Report::leaving, "leaving", wire::Bool{}, Presence::kOptional),
        field(&Report::progressed, "progressed", wire::Bool{}, Presence::kOptional),
        field(&Report::stacks, "stacks",
              wire::List<RankStack>{Limits::kMaxWorkersPerNode, to_json, stack_from},
              Presence::kWhenSet),
        field(
            &Report::timeline, "timeline",
            wire::List<TimelineEvent>{Limits::kMaxReportEvents, agent_event_json, agent_event_from},
            Presence::kWhenSet))
        .checked([](const Fields& f, const Report& m) {
          if (m.outcome == Outcome::kFailed && !m.failure)
            f.fail("reports a failure without describing it");
        });

json client_json(const ClientMessage& message) {
  return std::visit(
      [](const auto& m) -> json {
        using T = std::decay_t<decltype(m)>;
        if constexpr (std::is_same_v<T, Hello>) {
          return kHello.encode(m);
        } else if constexpr (std::is_same_v<T, Auth>) {
          return kAuth.encode(m);
        } else if constexpr (std::is_same_v<T, Join>) {
          return kJoin.encode(m);
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
          return kReport.encode(m);
        }
      },
      message);
}

ClientMessage client_from(const json& j) {
  const Fields f(j, "message");
  const std::string type = f.text("type", 32);
  if (type == "hello") return kHello.decode(f);
  if (type == "auth") return kAuth.decode(f);
  if (type == "join") return kJoin.decode(f);
  if (type == "heartbeat") return kHeartbeat.decode(f);
  if (type == "status") return kStatusQuery.decode(f);
  if (type == "records") return records_from(f);
  if (type == "resume") return kResume.decode(f);
  if (type == "hang") return kHangNotice.decode(f);
  if (type == "health") return kHealthReport.decode(f);
  if (type == "ping_report") return kPingReport.decode(f);
  if (type == "sample") return sample_from(f);
  if (type == "probe_report") return kProbeReport.decode(f);
  if (type == "report") return kReport.decode(f);
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
