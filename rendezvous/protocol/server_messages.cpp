// Messages from the server to agents: encoding, and decoding with every field checked.
#include "rendezvous/protocol/dump_wire.hpp"
#include "rendezvous/protocol/json_fields.hpp"
#include "rendezvous/protocol/protocol.hpp"
#include "rendezvous/protocol/snapshot_wire.hpp"
#include "rendezvous/protocol/status_wire.hpp"
#include "rendezvous/protocol/wire_parts.hpp"
#include "rendezvous/protocol/wire_shape.hpp"

namespace npu_run::rdzv {

namespace {

using wire::field;

// ---- the messages declared once (rendezvous/protocol/wire_shape.hpp) ----

// A refusal's fields nest under "error", and it says "ok": false.
const auto kErrorBody =
    wire::part<ErrorReply>(field(&ErrorReply::code, "code", wire::Text{64}),
                           field(&ErrorReply::message, "message", wire::Text{Limits::kMaxText}));

const auto kWelcome =
    wire::answer_shape<Welcome>("welcome",
                                field(&Welcome::heartbeat_interval_ms, "heartbeat_interval_ms",
                                      wire::Int<int64_t>{1, INT64_MAX}),
                                field(&Welcome::heartbeat_timeout_ms, "heartbeat_timeout_ms",
                                      wire::Int<int64_t>{1, INT64_MAX}));

const auto kChallenge = wire::answer_shape<Challenge>(
    "challenge", field(&Challenge::nonce, "nonce", wire::Text{Limits::kMaxNonce}),
    field(&Challenge::proof, "proof", wire::Text{Limits::kMaxNonce}));

const auto kStop = wire::answer_shape<StopWorkers>(
    "stop", field(&StopWorkers::round, "round", wire::Int<uint64_t>{0, INT64_MAX}),
    field(&StopWorkers::root_cause, "root_cause",
          wire::Object<FailureReport>{to_json, failure_from}));

const auto kReform = wire::answer_shape<Reform>(
    "reform", field(&Reform::round, "round", wire::Int<uint64_t>{0, INT64_MAX}),
    field(&Reform::host, "host", wire::Text{Limits::kMaxName}),
    field(&Reform::node_rank, "node_rank", wire::Int<int>{-1, Limits::kMaxNodes}),
    field(&Reform::reason, "reason", wire::Text{Limits::kMaxText}));

const auto kPings = wire::answer_shape<PingRequest>(
    "pings", field(&PingRequest::run, "run", wire::Int<uint64_t>{0, INT64_MAX}),
    field(&PingRequest::pings, "pings",
          wire::Array<std::vector<DevicePing>>{Limits::kMaxPings, to_json, pings_from}));

const auto kPingVerdict = wire::answer_shape<PingVerdict>(
    "ping_verdict",
    field(&PingVerdict::findings, "findings",
          wire::List<HealthFinding>{Limits::kMaxPingFindings, to_json, finding_from}));

const auto kStandby = wire::answer_shape<Standby>(
    "standby", field(&Standby::round, "round", wire::Int<uint64_t>{0, INT64_MAX}),
    field(&Standby::nodes, "nodes", wire::Int<int>{0, Limits::kMaxNodes}),
    field(&Standby::spares, "spares", wire::Int<int>{0, Limits::kMaxNodes}));

const auto kDismissed = wire::answer_shape<Dismissed>(
    "dismissed", field(&Dismissed::reason, "reason", wire::Text{Limits::kMaxText}),
    field(&Dismissed::exit_code, "exit_code", wire::Int<int>{0, 255}));

const auto kResumed = wire::answer_shape<Resumed>(
    "resumed", field(&Resumed::received, "received", wire::Int<uint64_t>{0, INT64_MAX}));

const auto kHeartbeatAck = wire::answer_shape<HeartbeatAck>(
    "heartbeat_ack", field(&HeartbeatAck::received, "received", wire::Int<uint64_t>{0, INT64_MAX}));

const auto kPeer = wire::part<PeerInfo>(
    field(&PeerInfo::node_rank, "node_rank", wire::Int<int>{0, Limits::kMaxNodes}),
    field(&PeerInfo::rank_offset, "rank_offset", wire::Int<int>{0, INT32_MAX}),
    field(&PeerInfo::node, "node", wire::Object<NodeInfo>{to_json, node_from}));

json peer_json(const PeerInfo& p) {
  return kPeer.encode(p);
}
PeerInfo peer_from(const json& j) {
  return kPeer.decode(Fields(j, "peer"));
}

// The largest message, the one that carries the job's shape to every node. Its node and first
// rank are bounded by the sizes that come with them.
const auto kAssigned =
    wire::answer_shape<Assigned>(
        "assigned", field(&Assigned::round, "round", wire::Int<uint64_t>{0, INT64_MAX}),
        field(&Assigned::restart_count, "restart_count", wire::Int<int>{0, 1'000'000}),
        field(&Assigned::nnodes, "nnodes", wire::Int<int>{1, Limits::kMaxNodes}),
        field(&Assigned::node_rank, "node_rank", wire::Int<int>{0, Limits::kMaxNodes}),
        field(&Assigned::world_size, "world_size", wire::Int<int>{1, INT32_MAX}),
        field(&Assigned::rank_offset, "rank_offset", wire::Int<int>{0, INT32_MAX}),
        field(&Assigned::master_addr, "master_addr", wire::Text{Limits::kMaxName}),
        field(&Assigned::master_port, "master_port", wire::Int<int>{1, 65535}),
        field(&Assigned::peers, "peers",
              wire::List<PeerInfo>{Limits::kMaxNodes, peer_json, peer_from},
              wire::Presence::kOptional),
        field(&Assigned::health_notes, "health_notes",
              wire::TextList{Limits::kMaxHealthNotes, Limits::kMaxText}, wire::Presence::kOptional),
        field(&Assigned::restore, "restore", wire::Object<RestorePoint>{restore_json, restore_from},
              wire::Presence::kOptional),
        field(&Assigned::copy_to, "copy_to", wire::Object<CopyPeer>{copy_peer_json, copy_peer_from},
              wire::Presence::kOptional),
        field(&Assigned::block, "block", wire::Text{Limits::kMaxName}, wire::Presence::kWhenSet),
        field(&Assigned::probe_notes, "probe_notes",
              wire::TextList{Limits::kMaxHealthNotes, Limits::kMaxText}, wire::Presence::kWhenSet))
        .checked([](const Fields& f, const Assigned& m) {
          if (m.node_rank >= m.nnodes)
            f.fail(fmt::format("'node_rank' = {} is outside 0..{}", m.node_rank, m.nnodes - 1));
          if (m.rank_offset >= m.world_size)
            f.fail(fmt::format("'rank_offset' = {} is outside 0..{}", m.rank_offset,
                               m.world_size - 1));
        });

// A class of failure comes with its reason, and only with one.
const auto kDecision =
    wire::answer_shape<Decision>(
        "decision", field(&Decision::round, "round", wire::Int<uint64_t>{0, INT64_MAX}),
        field(&Decision::action, "action", wire::Enum<Action>{}),
        field(&Decision::restart_count, "restart_count", wire::Int<int>{0, 1'000'000}),
        field(&Decision::exit_code, "exit_code", wire::Int<int>{0, 255}),
        field(&Decision::membership_change, "membership_change", wire::Bool{},
              wire::Presence::kOptional),
        field(&Decision::restarts_charged, "restarts_charged", wire::Int<int>{0, 1'000'000}),
        field(&Decision::root_cause, "root_cause",
              wire::Maybe<wire::Object<FailureReport>>{{to_json, failure_from}},
              wire::Presence::kWhenSet),
        field(&Decision::odd_ranks, "odd_ranks",
              wire::IntList{Limits::kMaxOddRanks, 0, INT32_MAX, "a bad rank"},
              wire::Presence::kWhenSet),
        field(&Decision::failure_class, "class", wire::Enum<FailureClass>{},
              wire::Presence::kWhenSet),
        field(&Decision::class_reason, "class_reason", wire::Text{Limits::kMaxText},
              wire::Presence::kOptional)
            .when([](const Decision& m) { return m.failure_class != FailureClass::kNone; }))
        .checked([](const Fields& f, const Decision& m) {
          if (m.failure_class != FailureClass::kNone) f.need("class_reason");
        });

const auto kProgress = wire::answer_shape<Progress>(
    "progress", field(&Progress::joined, "joined", wire::Int<int>{0, Limits::kMaxNodes}),
    field(&Progress::expected, "expected", wire::Int<int>{0, Limits::kMaxNodes}),
    field(&Progress::missing_node_ranks, "missing_node_ranks",
          wire::IntList{Limits::kMaxNodes, INT32_MIN, INT32_MAX, "a non-integer"}));

// A node's place in its group is bounded by the group's size, which comes with it.
const auto kProbe =
    wire::answer_shape<ProbeRequest>(
        "probe", field(&ProbeRequest::run, "run", wire::Int<uint64_t>{0, INT64_MAX}),
        field(&ProbeRequest::step, "step", wire::Int<int>{1, 3}),
        field(&ProbeRequest::group, "group", wire::Text{Limits::kMaxName}),
        field(&ProbeRequest::size, "size", wire::Int<int>{1, Limits::kMaxNodes}),
        field(&ProbeRequest::rank, "rank", wire::Int<int>{0, Limits::kMaxNodes}),
        field(&ProbeRequest::asked, "asked", wire::Int<int>{1, Limits::kMaxNodes}),
        field(&ProbeRequest::store_addr, "store_addr", wire::Text{Limits::kMaxName},
              wire::Presence::kOptional),
        field(&ProbeRequest::store_port, "store_port", wire::Int<int>{0, 65535}),
        field(&ProbeRequest::matmul, "matmul", wire::Bool{}, wire::Presence::kOptional),
        field(&ProbeRequest::full, "full", wire::Bool{}, wire::Presence::kOptional),
        field(&ProbeRequest::timeout_ms, "timeout_ms", wire::Int<int>{0, 3'600'000}))
        .checked([](const Fields& f, const ProbeRequest& m) {
          if (m.rank >= m.size)
            f.fail(fmt::format("'rank' = {} is outside 0..{}", m.rank, m.size - 1));
        });

json server_json(const ServerMessage& message) {
  return std::visit(
      [](const auto& m) -> json {
        using T = std::decay_t<decltype(m)>;
        if constexpr (std::is_same_v<T, Welcome>) {
          return kWelcome.encode(m);
        } else if constexpr (std::is_same_v<T, ErrorReply>) {
          return {{"type", "error"}, {"ok", false}, {"error", kErrorBody.encode(m)}};
        } else if constexpr (std::is_same_v<T, Progress>) {
          return kProgress.encode(m);
        } else if constexpr (std::is_same_v<T, Assigned>) {
          return kAssigned.encode(m);
        } else if constexpr (std::is_same_v<T, StopWorkers>) {
          return kStop.encode(m);
        } else if constexpr (std::is_same_v<T, Decision>) {
          return kDecision.encode(m);
        } else if constexpr (std::is_same_v<T, Challenge>) {
          return kChallenge.encode(m);
        } else if constexpr (std::is_same_v<T, Reform>) {
          return kReform.encode(m);
        } else if constexpr (std::is_same_v<T, JobStatus>) {
          return status_json(m);
        } else if constexpr (std::is_same_v<T, PingRequest>) {
          return kPings.encode(m);
        } else if constexpr (std::is_same_v<T, PingVerdict>) {
          return kPingVerdict.encode(m);
        } else if constexpr (std::is_same_v<T, ProbeRequest>) {
          return kProbe.encode(m);
        } else if constexpr (std::is_same_v<T, Standby>) {
          return kStandby.encode(m);
        } else if constexpr (std::is_same_v<T, Dismissed>) {
          return kDismissed.encode(m);
        } else if constexpr (std::is_same_v<T, CollectRecords>) {
          return collect_json(m);
        } else if constexpr (std::is_same_v<T, Resumed>) {
          return kResumed.encode(m);
        } else {
          return kHeartbeatAck.encode(m);
        }
      },
      message);
}

ServerMessage server_from(const json& j) {
  const Fields f(j, "message");
  const std::string type = f.text("type", 32);
  if (type == "error") return kErrorBody.decode(Fields(f.object("error"), "error"));
  if (type == "welcome") return kWelcome.decode(f);
  if (type == "progress") return kProgress.decode(f);
  if (type == "assigned") return kAssigned.decode(f);
  if (type == "stop") return kStop.decode(f);
  if (type == "reform") return kReform.decode(f);
  if (type == "decision") return kDecision.decode(f);
  if (type == "status") return status_from(f);
  if (type == "pings") return kPings.decode(f);
  if (type == "ping_verdict") return kPingVerdict.decode(f);
  if (type == "probe") return kProbe.decode(f);
  if (type == "standby") return kStandby.decode(f);
  if (type == "dismissed") return kDismissed.decode(f);
  if (type == "collect") return collect_from(f);
  if (type == "heartbeat_ack") return kHeartbeatAck.decode(f);
  if (type == "resumed") return kResumed.decode(f);
  if (type == "challenge") return kChallenge.decode(f);
  f.fail(fmt::format("has an unknown type '{}'", type));
}

}  // namespace

std::string encode(const ServerMessage& message) {
  return dump(server_json(message));
}

std::variant<ServerMessage, ProtocolError> decode_server_message(std::string_view json_text) {
  return decode_json<ServerMessage>(json_text, server_from);
}

}  // namespace npu_run::rdzv
