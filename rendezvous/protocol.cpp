#include "rendezvous/protocol.hpp"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

namespace npu_run::rdzv {

using nlohmann::json;

std::string encode_frame(std::string_view payload) {
  const auto n = static_cast<uint32_t>(payload.size());
  std::string frame;
  frame.reserve(4 + payload.size());
  frame.push_back(static_cast<char>((n >> 24) & 0xff));
  frame.push_back(static_cast<char>((n >> 16) & 0xff));
  frame.push_back(static_cast<char>((n >> 8) & 0xff));
  frame.push_back(static_cast<char>(n & 0xff));
  frame.append(payload);
  return frame;
}

std::optional<ProtocolError> FrameDecoder::feed(std::string_view data,
                                                std::vector<std::string>& frames) {
  if (failed_) return ProtocolError{"too_large", "the connection already sent an oversized frame"};
  buffer_.append(data);
  size_t pos = 0;
  while (buffer_.size() - pos >= 4) {
    const auto* p = reinterpret_cast<const unsigned char*>(buffer_.data() + pos);
    const size_t length =
        (size_t{p[0]} << 24) | (size_t{p[1]} << 16) | (size_t{p[2]} << 8) | size_t{p[3]};
    if (length > max_frame_) {
      failed_ = true;
      buffer_.clear();
      return ProtocolError{
          "too_large",
          fmt::format("frame of {} bytes exceeds the limit of {} bytes", length, max_frame_)};
    }
    if (buffer_.size() - pos - 4 < length) break;  // the rest of this frame has not arrived yet
    frames.emplace_back(buffer_, pos + 4, length);
    pos += 4 + length;
  }
  buffer_.erase(0, pos);
  return std::nullopt;
}

namespace {

// Thrown inside decoding only; decode_*() turn it into a ProtocolError.
struct BadMessage {
  std::string message;
};

// Reads fields of one JSON object with type and size checks.
class Fields {
 public:
  Fields(const json& object, std::string where) : object_(object), where_(std::move(where)) {
    if (!object_.is_object()) fail("is not a JSON object");
  }

  const json* find(const char* key) const {
    const auto it = object_.find(key);
    return it == object_.end() || it->is_null() ? nullptr : &*it;
  }
  const json& need(const char* key) const {
    const json* v = find(key);
    if (v == nullptr) fail(fmt::format("lacks '{}'", key));
    return *v;
  }
  std::string text(const char* key, size_t max, bool required = true) const {
    const json* v = required ? &need(key) : find(key);
    if (v == nullptr) return "";
    if (!v->is_string()) fail(fmt::format("'{}' is not a string", key));
    const auto& s = v->get_ref<const std::string&>();
    if (s.size() > max) fail(fmt::format("'{}' is longer than {} bytes", key, max));
    return s;
  }
  int64_t integer(const char* key, int64_t min, int64_t max) const {
    return integer_of(need(key), key, min, max);
  }
  std::optional<int64_t> optional_integer(const char* key, int64_t min, int64_t max) const {
    const json* v = find(key);
    if (v == nullptr) return std::nullopt;
    return integer_of(*v, key, min, max);
  }
  bool boolean(const char* key) const {
    const json* v = find(key);
    if (v == nullptr) return false;
    if (!v->is_boolean()) fail(fmt::format("'{}' is not true or false", key));
    return v->get<bool>();
  }
  const json& array(const char* key, size_t max, bool required = true) const {
    static const json kEmpty = json::array();
    const json* v = required ? &need(key) : find(key);
    if (v == nullptr) return kEmpty;
    if (!v->is_array()) fail(fmt::format("'{}' is not an array", key));
    if (v->size() > max) fail(fmt::format("'{}' has more than {} entries", key, max));
    return *v;
  }
  const json& object(const char* key) const {
    const json& v = need(key);
    if (!v.is_object()) fail(fmt::format("'{}' is not an object", key));
    return v;
  }
  [[noreturn]] void fail(const std::string& what) const {
    throw BadMessage{fmt::format("{} {}", where_, what)};
  }

 private:
  int64_t integer_of(const json& v, const char* key, int64_t min, int64_t max) const {
    if (!v.is_number_integer()) fail(fmt::format("'{}' is not an integer", key));
    if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(max)) {
      fail(fmt::format("'{}' = {} is outside {}..{}", key, v.get<uint64_t>(), min, max));
    }
    const int64_t value = v.get<int64_t>();
    if (value < min || value > max)
      fail(fmt::format("'{}' = {} is outside {}..{}", key, value, min, max));
    return value;
  }

  const json& object_;
  std::string where_;
};

json to_json(const NodeInfo& n) {
  return {{"host", n.host},
          {"addr", n.addr},
          {"nproc", n.nproc},
          {"devices", n.devices},
          {"device_ips", n.device_ips},
          {"worker_port", n.worker_port}};
}

NodeInfo node_from(const json& j) {
  const Fields f(j, "node info");
  NodeInfo n;
  n.host = f.text("host", Limits::kMaxName);
  n.addr = f.text("addr", Limits::kMaxName);
  n.nproc = static_cast<int>(f.integer("nproc", 1, Limits::kMaxWorkersPerNode));
  for (const json& d : f.array("devices", Limits::kMaxDevices)) {
    if (!d.is_number_integer() || d.get<int64_t>() < 0 || d.get<int64_t>() > 1'000'000)
      f.fail("'devices' holds a bad id");
    n.devices.push_back(d.get<int>());
  }
  for (const json& ip : f.array("device_ips", Limits::kMaxDevices, false)) {
    if (!ip.is_string() || ip.get_ref<const std::string&>().size() > Limits::kMaxName) {
      f.fail("'device_ips' holds a bad address");
    }
    n.device_ips.push_back(ip.get<std::string>());
  }
  n.worker_port = static_cast<int>(f.integer("worker_port", 1, 65535));
  if (static_cast<int>(n.devices.size()) != n.nproc) {
    f.fail(fmt::format("lists {} devices for {} workers", n.devices.size(), n.nproc));
  }
  return n;
}

json to_json(const FailureReport& r) {
  return {{"host", r.host},
          {"node_rank", r.node_rank},
          {"rank", r.rank},
          {"local_rank", r.local_rank},
          {"pid", r.pid},
          {"exit_code", r.exit_code},
          {"description", r.description},
          {"error_message", r.error_message},
          {"time_ms", r.time_ms},
          {"stopped_after_error", r.stopped_after_error}};
}

FailureReport failure_from(const json& j) {
  const Fields f(j, "failure report");
  FailureReport r;
  r.host = f.text("host", Limits::kMaxName);
  r.node_rank = static_cast<int>(f.integer("node_rank", -1, Limits::kMaxNodes));
  r.rank = static_cast<int>(f.integer("rank", -1, INT32_MAX));
  r.local_rank = static_cast<int>(f.integer("local_rank", -1, Limits::kMaxWorkersPerNode));
  r.pid = static_cast<int>(f.integer("pid", -1, INT32_MAX));
  r.exit_code = static_cast<int>(f.integer("exit_code", 0, 255));
  r.description = f.text("description", Limits::kMaxText);
  r.error_message = f.text("error_message", Limits::kMaxText, false);
  r.time_ms = f.integer("time_ms", 0, INT64_MAX);
  r.stopped_after_error = f.boolean("stopped_after_error");
  return r;
}

const char* outcome_name(Outcome o) {
  switch (o) {
    case Outcome::kSucceeded:
      return "succeeded";
    case Outcome::kFailed:
      return "failed";
    case Outcome::kStopped:
      return "stopped";
  }
  return "?";
}

json client_json(const ClientMessage& message) {
  return std::visit(
      [](const auto& m) -> json {
        using T = std::decay_t<decltype(m)>;
        if constexpr (std::is_same_v<T, Hello>) {
          return {{"type", "hello"},
                  {"magic", m.magic},
                  {"version", m.version},
                  {"run_id", m.run_id},
                  {"nonce", m.nonce}};
        } else if constexpr (std::is_same_v<T, Auth>) {
          return {{"type", "auth"}, {"proof", m.proof}};
        } else if constexpr (std::is_same_v<T, Join>) {
          json j{{"type", "join"},
                 {"node", to_json(m.node)},
                 {"min_nodes", m.min_nodes},
                 {"max_nodes", m.max_nodes},
                 {"max_restarts", m.max_restarts},
                 {"want_peers", m.want_peers}};
          if (m.node_rank) j["node_rank"] = *m.node_rank;
          return j;
        } else if constexpr (std::is_same_v<T, Heartbeat>) {
          return {{"type", "heartbeat"}};
        } else {
          json j{{"type", "report"},
                 {"round", m.round},
                 {"outcome", outcome_name(m.outcome)},
                 {"stop_signal", m.stop_signal},
                 {"fatal", m.fatal},
                 {"leaving", m.leaving}};
          if (m.failure) j["failure"] = to_json(*m.failure);
          return j;
        }
      },
      message);
}

ClientMessage client_from(const json& j) {
  const Fields f(j, "message");
  const std::string type = f.text("type", 32);
  if (type == "hello") {
    return Hello{f.text("magic", 64), static_cast<int>(f.integer("version", 0, 1'000'000)),
                 f.text("run_id", Limits::kMaxRunId), f.text("nonce", Limits::kMaxNonce, false)};
  }
  if (type == "auth") return Auth{f.text("proof", Limits::kMaxNonce)};
  if (type == "join") {
    Join m;
    m.node = node_from(f.object("node"));
    if (auto r = f.optional_integer("node_rank", 0, Limits::kMaxNodes))
      m.node_rank = static_cast<int>(*r);
    m.min_nodes = static_cast<int>(f.integer("min_nodes", 1, Limits::kMaxNodes));
    m.max_nodes = static_cast<int>(f.integer("max_nodes", 1, Limits::kMaxNodes));
    m.max_restarts = static_cast<int>(f.integer("max_restarts", 0, 1'000'000));
    m.want_peers = f.boolean("want_peers");
    return m;
  }
  if (type == "heartbeat") return Heartbeat{};
  if (type == "report") {
    Report m;
    m.round = static_cast<uint64_t>(f.integer("round", 0, INT64_MAX));
    const std::string outcome = f.text("outcome", 16);
    if (outcome == "succeeded")
      m.outcome = Outcome::kSucceeded;
    else if (outcome == "failed")
      m.outcome = Outcome::kFailed;
    else if (outcome == "stopped")
      m.outcome = Outcome::kStopped;
    else
      f.fail(fmt::format("has an unknown outcome '{}'", outcome));
    if (f.find("failure") != nullptr) m.failure = failure_from(f.object("failure"));
    m.stop_signal = static_cast<int>(f.optional_integer("stop_signal", 0, 64).value_or(0));
    m.fatal = f.boolean("fatal");
    m.leaving = f.boolean("leaving");
    if (m.outcome == Outcome::kFailed && !m.failure)
      f.fail("reports a failure without describing it");
    return m;
  }
  f.fail(fmt::format("has an unknown type '{}'", type));
}

json server_json(const ServerMessage& message) {
  return std::visit(
      [](const auto& m) -> json {
        using T = std::decay_t<decltype(m)>;
        if constexpr (std::is_same_v<T, Welcome>) {
          return {{"type", "welcome"},
                  {"ok", true},
                  {"heartbeat_interval_ms", m.heartbeat_interval_ms},
                  {"heartbeat_timeout_ms", m.heartbeat_timeout_ms}};
        } else if constexpr (std::is_same_v<T, ErrorReply>) {
          return {{"type", "error"},
                  {"ok", false},
                  {"error", {{"code", m.code}, {"message", m.message}}}};
        } else if constexpr (std::is_same_v<T, Progress>) {
          return {{"type", "progress"},
                  {"ok", true},
                  {"joined", m.joined},
                  {"expected", m.expected},
                  {"missing_node_ranks", m.missing_node_ranks}};
        } else if constexpr (std::is_same_v<T, Assigned>) {
          json peers = json::array();
          for (const PeerInfo& p : m.peers) {
            peers.push_back({{"node_rank", p.node_rank},
                             {"rank_offset", p.rank_offset},
                             {"node", to_json(p.node)}});
          }
          return {{"type", "assigned"},
                  {"ok", true},
                  {"round", m.round},
                  {"restart_count", m.restart_count},
                  {"node_rank", m.node_rank},
                  {"nnodes", m.nnodes},
                  {"world_size", m.world_size},
                  {"rank_offset", m.rank_offset},
                  {"master_addr", m.master_addr},
                  {"master_port", m.master_port},
                  {"peers", peers}};
        } else if constexpr (std::is_same_v<T, StopWorkers>) {
          return {{"type", "stop"},
                  {"ok", true},
                  {"round", m.round},
                  {"root_cause", to_json(m.root_cause)}};
        } else if constexpr (std::is_same_v<T, Decision>) {
          json j{{"type", "decision"},
                 {"ok", true},
                 {"round", m.round},
                 {"action", m.action == Action::kRestart ? "restart" : "finish"},
                 {"restart_count", m.restart_count},
                 {"exit_code", m.exit_code},
                 {"membership_change", m.membership_change}};
          if (m.root_cause) j["root_cause"] = to_json(*m.root_cause);
          return j;
        } else if constexpr (std::is_same_v<T, Challenge>) {
          return {{"type", "challenge"}, {"ok", true}, {"nonce", m.nonce}, {"proof", m.proof}};
        } else if constexpr (std::is_same_v<T, Reform>) {
          return {{"type", "reform"},         {"ok", true},
                  {"round", m.round},         {"host", m.host},
                  {"node_rank", m.node_rank}, {"reason", m.reason}};
        } else {
          return {{"type", "heartbeat_ack"}, {"ok", true}};
        }
      },
      message);
}

ServerMessage server_from(const json& j) {
  const Fields f(j, "message");
  const std::string type = f.text("type", 32);
  if (type == "error") {
    const Fields e(f.object("error"), "error");
    return ErrorReply{e.text("code", 64), e.text("message", Limits::kMaxText)};
  }
  if (type == "welcome") {
    return Welcome{f.integer("heartbeat_interval_ms", 1, INT64_MAX),
                   f.integer("heartbeat_timeout_ms", 1, INT64_MAX)};
  }
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
  if (type == "assigned") {
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
    return m;
  }
  if (type == "stop")
    return StopWorkers{static_cast<uint64_t>(f.integer("round", 0, INT64_MAX)),
                       failure_from(f.object("root_cause"))};
  if (type == "reform") {
    return Reform{static_cast<uint64_t>(f.integer("round", 0, INT64_MAX)),
                  f.text("host", Limits::kMaxName),
                  static_cast<int>(f.integer("node_rank", -1, Limits::kMaxNodes)),
                  f.text("reason", Limits::kMaxText)};
  }
  if (type == "decision") {
    Decision m;
    m.round = static_cast<uint64_t>(f.integer("round", 0, INT64_MAX));
    const std::string action = f.text("action", 16);
    if (action == "restart")
      m.action = Action::kRestart;
    else if (action == "finish")
      m.action = Action::kFinish;
    else
      f.fail(fmt::format("has an unknown action '{}'", action));
    m.restart_count = static_cast<int>(f.integer("restart_count", 0, 1'000'000));
    m.exit_code = static_cast<int>(f.integer("exit_code", 0, 255));
    m.membership_change = f.boolean("membership_change");
    if (f.find("root_cause") != nullptr) m.root_cause = failure_from(f.object("root_cause"));
    return m;
  }
  if (type == "heartbeat_ack") return HeartbeatAck{};
  if (type == "challenge")
    return Challenge{f.text("nonce", Limits::kMaxNonce), f.text("proof", Limits::kMaxNonce)};
  f.fail(fmt::format("has an unknown type '{}'", type));
}

template <typename Message, typename Convert>
std::variant<Message, ProtocolError> decode(std::string_view text, Convert convert) {
  const json j = json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return ProtocolError{"bad_json", "the frame is not valid JSON"};
  try {
    return convert(j);
  } catch (const BadMessage& e) {
    return ProtocolError{"bad_message", e.message};
  } catch (const json::exception& e) {  // a conversion the checks above did not foresee
    return ProtocolError{"bad_message", e.what()};
  }
}

}  // namespace

// Invalid UTF-8 (say, a host name echoed in an error) is replaced rather than thrown on.
std::string encode(const ClientMessage& message) {
  return client_json(message).dump(-1, ' ', false, json::error_handler_t::replace);
}
std::string encode(const ServerMessage& message) {
  return server_json(message).dump(-1, ' ', false, json::error_handler_t::replace);
}

std::variant<ClientMessage, ProtocolError> decode_client_message(std::string_view json_text) {
  return decode<ClientMessage>(json_text, client_from);
}

std::variant<ServerMessage, ProtocolError> decode_server_message(std::string_view json_text) {
  return decode<ServerMessage>(json_text, server_from);
}

}  // namespace npu_run::rdzv
