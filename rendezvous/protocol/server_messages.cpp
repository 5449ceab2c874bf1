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

// The largest message, the one that carries the job's shape to every node.
json assigned_json(const Assigned& m) {
  json peers = json::array();
  for (const PeerInfo& p : m.peers) {
    peers.push_back(
        {{"node_rank", p.node_rank}, {"rank_offset", p.rank_offset}, {"node", to_json(p.node)}});
  }
  json j = answer("assigned", {{"round", m.round},
                               {"restart_count", m.restart_count},
                               {"node_rank", m.node_rank},
                               {"nnodes", m.nnodes},
                               {"world_size", m.world_size},
                               {"rank_offset", m.rank_offset},
                               {"master_addr", m.master_addr},
                               {"master_port", m.master_port},
                               {"peers", peers},
                               {"health_notes", m.health_notes},
                               {"restore", restore_json(m.restore)},
                               {"copy_to", copy_peer_json(m.copy_to)}});
  if (!m.block.empty()) j["block"] = m.block;
  if (!m.probe_notes.empty()) j["probe_notes"] = m.probe_notes;
  return j;
}

Assigned assigned_from(const Fields& f) {
  Assigned m;
  m.round = static_cast<uint64_t>(f.integer("round", 0, INT64_MAX));
  m.restart_count = static_cast<int>(f.integer("restart_count", 0, 1'000'000));
  m.nnodes = static_cast<int>(f.integer("nnodes", 1, Limits::kMaxNodes));
  m.node_rank = static_cast<int>(f.integer("node_rank", 0, m.nnodes - 1));
  m.world_size = static_cast<int>(f.integer("world_size", 1, INT32_MAX));
  m.rank_offset = static_cast<int>(f.integer("rank_offset", 0, m.world_size - 1));
  m.master_addr = f.text("master_addr", Limits::kMaxName);
  m.master_port = static_cast<int>(f.integer("master_port", 1, 65535));
  for (const json& p : f.array("peers", Limits::kMaxNodes, false)) {
    const Fields pf(p, "peer");
    m.peers.push_back(PeerInfo{static_cast<int>(pf.integer("node_rank", 0, Limits::kMaxNodes)),
                               static_cast<int>(pf.integer("rank_offset", 0, INT32_MAX)),
                               node_from(pf.object("node"))});
  }
  for (const json& note : f.array("health_notes", Limits::kMaxHealthNotes, false)) {
    if (!note.is_string() || note.get_ref<const std::string&>().size() > Limits::kMaxText)
      f.fail("'health_notes' holds a bad entry");
    m.health_notes.push_back(note.get<std::string>());
  }
  if (const json* restore = f.find("restore")) m.restore = restore_from(*restore);
  if (const json* copy_to = f.find("copy_to")) m.copy_to = copy_peer_from(*copy_to);
  m.block = f.text("block", Limits::kMaxName, false);
  for (const json& note : f.array("probe_notes", Limits::kMaxHealthNotes, false)) {
    if (!note.is_string() || note.get_ref<const std::string&>().size() > Limits::kMaxText)
      f.fail("'probe_notes' holds a bad entry");
    m.probe_notes.push_back(note.get<std::string>());
  }
  return m;
}

json decision_json(const Decision& m) {
  json j = answer("decision", {{"round", m.round},
                               {"action", m.action},
                               {"restart_count", m.restart_count},
                               {"exit_code", m.exit_code},
                               {"membership_change", m.membership_change},
                               {"restarts_charged", m.restarts_charged}});
  if (m.root_cause) j["root_cause"] = to_json(*m.root_cause);
  if (!m.odd_ranks.empty()) j["odd_ranks"] = m.odd_ranks;
  if (m.failure_class != FailureClass::kNone) {
    j["class"] = m.failure_class;
    j["class_reason"] = m.class_reason;
  }
  return j;
}

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
          return {{"type", "error"},
                  {"ok", false},
                  {"error", {{"code", m.code}, {"message", m.message}}}};
        } else if constexpr (std::is_same_v<T, Progress>) {
          return answer("progress", {{"joined", m.joined},
                                     {"expected", m.expected},
                                     {"missing_node_ranks", m.missing_node_ranks}});
        } else if constexpr (std::is_same_v<T, Assigned>) {
          return assigned_json(m);
        } else if constexpr (std::is_same_v<T, StopWorkers>) {
          return kStop.encode(m);
        } else if constexpr (std::is_same_v<T, Decision>) {
          return decision_json(m);
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

Decision decision_from(const Fields& f) {
  Decision m;
  m.round = static_cast<uint64_t>(f.integer("round", 0, INT64_MAX));
  m.action = enum_field<Action>(f, "action");
  m.restart_count = static_cast<int>(f.integer("restart_count", 0, 1'000'000));
  m.exit_code = static_cast<int>(f.integer("exit_code", 0, 255));
  m.membership_change = f.boolean("membership_change");
  m.restarts_charged = static_cast<int>(f.integer("restarts_charged", 0, 1'000'000));
  if (f.find("root_cause") != nullptr) m.root_cause = failure_from(f.object("root_cause"));
  for (const json& r : f.array("odd_ranks", Limits::kMaxOddRanks, false)) {
    if (!r.is_number_integer() || r.get<int64_t>() < 0 || r.get<int64_t>() > INT32_MAX)
      f.fail("'odd_ranks' holds a bad rank");
    m.odd_ranks.push_back(r.get<int>());
  }
  if (f.find("class") != nullptr) {
    m.failure_class = enum_field<FailureClass>(f, "class");
    m.class_reason = f.text("class_reason", Limits::kMaxText);
  }
  return m;
}

ServerMessage server_from(const json& j) {
  const Fields f(j, "message");
  const std::string type = f.text("type", 32);
  if (type == "error") {
    const Fields e(f.object("error"), "error");
    return ErrorReply{e.text("code", 64), e.text("message", Limits::kMaxText)};
  }
  if (type == "welcome") return kWelcome.decode(f);
  if (type == "progress") {
    Progress m;
    m.joined = static_cast<int>(f.integer("joined", 0, Limits::kMaxNodes));
    m.expected = static_cast<int>(f.integer("expected", 0, Limits::kMaxNodes));
    for (const json& r : f.array("missing_node_ranks", Limits::kMaxNodes)) {
      if (!r.is_number_integer()) f.fail("'missing_node_ranks' holds a non-integer");
      m.missing_node_ranks.push_back(r.get<int>());
    }
    return m;
  }
  if (type == "assigned") return assigned_from(f);
  if (type == "stop") return kStop.decode(f);
  if (type == "reform") return kReform.decode(f);
  if (type == "decision") return decision_from(f);
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
