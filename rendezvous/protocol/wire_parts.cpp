#include "rendezvous/protocol/wire_parts.hpp"

#include "basics/enum_table.hpp"
#include "basics/text.hpp"
#include "rendezvous/protocol/json_fields.hpp"
#include "rendezvous/protocol/topology_wire.hpp"

namespace npu_run::rdzv {

json answer(const char* type, json fields) {
  fields["type"] = type;
  fields["ok"] = true;
  return fields;
}

json to_json(const NodeInfo& n) {
  json j = {{"host", n.host},
            {"addr", n.addr},
            {"nproc", n.nproc},
            {"devices", n.devices},
            {"device_ips", n.device_ips},
            {"worker_port", n.worker_port}};
  if (!n.topology.empty() || !n.topology.super_device_ids.empty())
    j["topology"] = to_json(n.topology);
  return j;
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
  if (const json* t = f.find("topology")) n.topology = topology_from(*t);
  if (static_cast<int>(n.devices.size()) != n.nproc) {
    f.fail(fmt::format("lists {} devices for {} workers", n.devices.size(), n.nproc));
  }
  return n;
}

json to_json(const FailureEvidence& e) {
  json j = json::object();
  for (const auto& [key, text] :
       {std::pair{"fault", &e.fault}, std::pair{"exception", &e.exception},
        std::pair{"frame", &e.frame}, std::pair{"last_beat", &e.last_beat},
        std::pair{"last_line", &e.last_line}}) {
    if (!text->empty()) j[key] = *text;
  }
  for (const auto& [key, flag] :
       {std::pair{"early", e.early}, std::pair{"usage", e.usage}, std::pair{"oom", e.oom}}) {
    if (flag) j[key] = true;
  }
  return j;
}

FailureEvidence evidence_from(const json& j) {
  const Fields f(j, "failure evidence");
  constexpr size_t kMax = Limits::kMaxEvidenceText;
  return FailureEvidence{f.text("fault", kMax, false),
                         f.text("exception", kMax, false),
                         f.text("frame", kMax, false),
                         f.text("last_beat", kMax, false),
                         f.text("last_line", kMax, false),
                         f.boolean("early"),
                         f.boolean("usage"),
                         f.boolean("oom")};
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
          {"stopped_after_error", r.stopped_after_error},
          {"hang", r.hang},
          {"lost", r.lost},
          {"evidence", to_json(r.evidence)}};
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
  r.hang = f.boolean("hang");
  r.lost = f.boolean("lost");
  if (f.find("evidence") != nullptr) r.evidence = evidence_from(f.object("evidence"));
  return r;
}

namespace {

json to_json(const GroupCalls& g) {
  json calls = json::array();
  for (const RecordedCall& c : g.last) {
    calls.push_back({{"seq", c.seq},
                     {"op", c.op},
                     {"sizes", c.sizes},
                     {"dtypes", c.dtypes},
                     {"age_ms", c.age_ms},
                     {"completed", c.completed}});
  }
  return {{"group", g.group}, {"entered", g.entered}, {"completed", g.completed}, {"last", calls}};
}

GroupCalls group_calls_from(const json& j) {
  const Fields f(j, "recorded group");
  GroupCalls g;
  g.group = f.text("group", Limits::kMaxCallText);
  g.entered = f.integer("entered", 0, INT64_MAX);
  g.completed = f.integer("completed", 0, INT64_MAX);
  for (const json& call : f.array("last", Limits::kMaxRecordedCalls)) {
    const Fields c(call, "recorded call");
    g.last.push_back(RecordedCall{
        c.integer("seq", 0, INT64_MAX), c.text("op", Limits::kMaxCallText),
        c.text("sizes", Limits::kMaxCallText, false), c.text("dtypes", Limits::kMaxCallText, false),
        c.integer("age_ms", -1, INT64_MAX), c.boolean("completed")});
  }
  return g;
}

}  // namespace

json to_json(const RankStack& s) {
  json j = {{"rank", s.rank},     {"local_rank", s.local_rank}, {"pid", s.pid},
            {"frames", s.frames}, {"last_beat", s.last_beat},   {"silence_ms", s.silence_ms}};
  // Only what a hang collected through the worker server: older servers never see it.
  if (s.record == RankRecord::kSignal) return j;
  j["record"] = s.record;
  j["recorder"] = s.recorder;
  json groups = json::array();
  for (const GroupCalls& g : s.groups) groups.push_back(to_json(g));
  j["groups"] = std::move(groups);
  return j;
}

RankStack stack_from(const json& j) {
  const Fields f(j, "rank stack");
  RankStack s;
  s.rank = static_cast<int>(f.integer("rank", 0, INT32_MAX));
  s.local_rank = static_cast<int>(f.integer("local_rank", 0, Limits::kMaxWorkersPerNode));
  s.pid = static_cast<int>(f.integer("pid", -1, INT32_MAX));
  for (const json& frame : f.array("frames", Limits::kMaxStackFrames)) {
    if (!frame.is_string() || frame.get_ref<const std::string&>().size() > Limits::kMaxFrameText)
      f.fail("'frames' holds a bad frame");
    s.frames.push_back(frame.get<std::string>());
  }
  if (s.frames.empty()) f.fail("has no frames");
  s.last_beat = f.text("last_beat", Limits::kMaxBeatText, false);
  s.silence_ms = f.integer("silence_ms", -1, INT64_MAX);
  if (f.find("record") == nullptr) return s;
  s.record = enum_field<RankRecord>(f, "record");
  s.recorder = f.boolean("recorder");
  for (const json& g : f.array("groups", Limits::kMaxRecordedGroups, false))
    s.groups.push_back(group_calls_from(g));
  return s;
}

json to_json(const RankBeat& b) {
  json j{{"local_rank", b.local_rank}, {"beats", b.beats}, {"text", b.text}, {"age_ms", b.age_ms}};
  if (b.snapshot) {
    j["snapshot"] = {{"memory", b.snapshot->memory},
                     {"stored", b.snapshot->stored},
                     {"to_write", b.snapshot->to_write},
                     {"copied", b.snapshot->copied}};
  }
  return j;
}

RankBeat beat_from(const json& j) {
  const Fields f(j, "rank beat");
  RankBeat b;
  b.local_rank = static_cast<int>(f.integer("local_rank", 0, Limits::kMaxWorkersPerNode));
  b.beats = static_cast<uint64_t>(f.integer("beats", 0, INT64_MAX));
  b.text = f.text("text", Limits::kMaxBeatText, false);
  b.age_ms = f.integer("age_ms", -1, INT64_MAX);
  if (f.find("snapshot") != nullptr) {
    const Fields s(f.object("snapshot"), "rank snapshot");
    b.snapshot =
        RankSnapshot{s.integer("memory", -1, INT64_MAX), s.integer("stored", -1, INT64_MAX),
                     static_cast<int>(s.integer("to_write", 0, 1'000'000)),
                     s.find("copied") ? s.integer("copied", -1, INT64_MAX) : -1};
  }
  return b;
}

json to_json(const std::vector<RankBeat>& ranks) {
  json out = json::array();
  for (const RankBeat& b : ranks) out.push_back(to_json(b));
  return out;
}

std::vector<RankBeat> beats_from(const json& array) {
  std::vector<RankBeat> out;
  for (const json& b : array) out.push_back(beat_from(b));
  return out;
}

const char* health_mode_name(HealthMode mode) {
  return kHealthModeNames.name(mode).data();  // the names are literals: NUL-terminated
}

HealthMode health_mode_from(const std::string& name) {
  if (const auto mode = kHealthModeNames.find(name)) return *mode;
  throw BadMessage{fmt::format("has an unknown health mode '{}'", name)};
}

json to_json(const HealthFinding& f) {
  return {{"check", f.check},
          {"device", f.device},
          {"status", to_string(f.status)},
          {"detail", f.detail},
          {"fix", f.fix}};
}

json verdict_json(const NodeVerdict& v) {
  json findings = json::array();
  for (const HealthFinding& f : v.findings) findings.push_back(to_json(f));
  json tls = json::object();
  for (const auto& [device, value] : v.tls_switch) tls[std::to_string(device)] = value;
  json ips = json::array();
  for (const DeviceIp& d : v.device_ips) ips.push_back({{"device", d.device}, {"ip", d.ip}});
  return {{"host", v.host},
          {"elapsed_ms", v.elapsed_ms},
          {"slowest_call", v.slowest_call.substr(0, kMaxSentText)},
          {"slowest_ms", v.slowest_ms},
          {"passed", v.omitted_passes},
          {"findings", std::move(findings)},
          {"tls_switch", std::move(tls)},
          {"device_ips", std::move(ips)},
          {"settings", v.settings}};
}

HealthFinding finding_from(const json& j) {
  const Fields f(j, "health finding");
  HealthFinding finding;
  finding.check = f.text("check", 32);
  finding.device = static_cast<int>(f.integer("device", -1, Limits::kMaxDevices));
  const std::string status = f.text("status", 16);
  bool known = false;
  for (HealthStatus s : {HealthStatus::kPass, HealthStatus::kWarn, HealthStatus::kFail,
                         HealthStatus::kSkipped, HealthStatus::kNotRun}) {
    if (status == to_string(s)) {
      finding.status = s;
      known = true;
    }
  }
  if (!known) f.fail(fmt::format("has an unknown status '{}'", status));
  finding.detail = f.text("detail", kMaxSentText);
  finding.fix = f.text("fix", kMaxSentText, false);
  return finding;
}

namespace {

// Settings that must agree: a few dozen names at most, each value a version or a hash.
constexpr size_t kMaxSettings = 64;
constexpr size_t kMaxSettingText = 256;
constexpr size_t kMaxAddressText = 64;  // an IPv6 address with room to spare

}  // namespace

NodeVerdict verdict_from(const json& j) {
  const Fields f(j, "health verdict");
  NodeVerdict v;
  v.host = f.text("host", Limits::kMaxName);
  v.elapsed_ms = f.integer("elapsed_ms", 0, INT64_MAX);
  v.slowest_call = f.text("slowest_call", kMaxSentText, false);
  v.slowest_ms = f.optional_integer("slowest_ms", 0, INT64_MAX).value_or(0);
  v.omitted_passes = static_cast<int>(f.integer("passed", 0, 1'000'000));
  for (const json& finding : f.array("findings", kMaxSentFindings))
    v.findings.push_back(finding_from(finding));
  const json& tls = f.object("tls_switch");
  if (tls.size() > Limits::kMaxDevices) f.fail("'tls_switch' has too many devices");
  for (const auto& [device, value] : tls.items()) {
    const auto id = parse_integer(device, 0, static_cast<long long>(Limits::kMaxDevices));
    if (!id || !value.is_number_integer()) f.fail("'tls_switch' holds a bad entry");
    v.tls_switch[static_cast<int>(*id)] = value.get<int>();
  }
  for (const json& d : f.array("device_ips", kMaxSentDevices, false)) {
    const Fields df(d, "device address");
    v.device_ips.push_back({static_cast<int>(df.integer("device", 0, Limits::kMaxDevices)),
                            df.text("ip", kMaxAddressText)});
  }
  const json& settings = f.object("settings");
  if (settings.size() > kMaxSettings) f.fail("'settings' has too many entries");
  for (const auto& [name, value] : settings.items()) {
    if (name.size() > kMaxSettingText || !value.is_string() ||
        value.get_ref<const std::string&>().size() > kMaxSettingText)
      f.fail("'settings' holds a bad entry");
    v.settings[name] = value.get<std::string>();
  }
  return v;
}

json to_json(const std::vector<DevicePing>& pings) {
  json array = json::array();
  for (const DevicePing& p : pings) {
    array.push_back(
        {{"device", p.device}, {"ip", p.ip}, {"peer", p.peer}, {"peer_device", p.peer_device}});
  }
  return array;
}

std::vector<DevicePing> pings_from(const json& array) {
  std::vector<DevicePing> pings;
  for (const json& j : array) {
    const Fields f(j, "ping");
    pings.push_back({static_cast<int>(f.integer("device", 0, Limits::kMaxDevices)),
                     f.text("ip", kMaxAddressText), f.text("peer", Limits::kMaxName),
                     static_cast<int>(f.integer("peer_device", 0, Limits::kMaxDevices))});
  }
  return pings;
}

namespace {

constexpr EnumTable<PingAnswer, 3> kPingAnswers{{{
    {PingAnswer::kReached, "reached"},
    {PingAnswer::kUnreached, "unreached"},
    {PingAnswer::kNotRun, "not run"},
}}};

}  // namespace

json to_json(const std::vector<PingResult>& results) {
  json array = json::array();
  for (const PingResult& r : results) {
    array.push_back({{"device", r.device},
                     {"ip", r.ip},
                     {"answer", kPingAnswers.name(r.answer)},
                     {"detail", r.detail}});
  }
  return array;
}

std::vector<PingResult> ping_results_from(const json& array) {
  std::vector<PingResult> results;
  for (const json& j : array) {
    const Fields f(j, "ping result");
    PingResult r{static_cast<int>(f.integer("device", 0, Limits::kMaxDevices)),
                 f.text("ip", kMaxAddressText), PingAnswer::kNotRun,
                 f.text("detail", Limits::kMaxPingText, false)};
    const auto answer = kPingAnswers.find(f.text("answer", 16));
    if (!answer) f.fail("has an unknown answer");
    r.answer = *answer;
    results.push_back(std::move(r));
  }
  return results;
}

}  // namespace npu_run::rdzv
