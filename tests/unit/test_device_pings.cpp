// The device-plane pings: who pings whom (a ring of same-index devices, chords for larger jobs,
// never more than kMaxPingsPerDevice per device), what unreached pairs mean for each end, the
// node plan's ping run, the messages' codec, and the rendezvous waiting for every answer.
#include <fmt/format.h>

#include <catch2/catch.hpp>

#include "health/device_pings.hpp"
#include "health/node_checks.hpp"
#include "rendezvous/protocol.hpp"
#include "rendezvous/state.hpp"
#include "support/outgoing.hpp"

namespace test_device_pings {

using namespace npu_run;
using namespace npu_run::rdzv;
using Catch::Matchers::Contains;
using npu_run::testing::message_to;

namespace {

const Now t0{Clock::time_point{}, 1'700'000'000'000};

// Node n's devices 0..count-1 at 10.0.n.(10+d).
std::vector<DeviceIp> addresses(int node, int count = 8) {
  std::vector<DeviceIp> ips;
  for (int d = 0; d < count; ++d) ips.push_back({d, fmt::format("10.0.{}.{}", node, 10 + d)});
  return ips;
}

std::vector<PingNode> ring(int nodes, int devices = 8) {
  std::vector<PingNode> out;
  for (int n = 0; n < nodes; ++n) {
    out.push_back({fmt::format("node {} (host-{})", n, n), addresses(n, devices)});
  }
  return out;
}

// Every planned ping reached, except those from `from` to an address in `dead`.
std::vector<std::vector<PingResult>> answers(const std::vector<std::vector<DevicePing>>& plans,
                                             const std::vector<std::string>& dead) {
  std::vector<std::vector<PingResult>> out(plans.size());
  for (size_t n = 0; n < plans.size(); ++n) {
    for (const DevicePing& p : plans[n]) {
      const bool lost = std::find(dead.begin(), dead.end(), p.ip) != dead.end();
      out[n].push_back({p.device, p.ip, lost ? PingAnswer::kUnreached : PingAnswer::kReached,
                        lost ? "recv time out seq=0" : "3 packets transmitted, 3 received"});
    }
  }
  return out;
}

size_t count(const std::vector<HealthFinding>& findings, HealthStatus status) {
  return std::count_if(findings.begin(), findings.end(),
                       [&](const HealthFinding& f) { return f.status == status; });
}

}  // namespace

TEST_CASE("device pings: a ring of same-index devices, chords for larger jobs, bounded",
          "[health][pings]") {
  CHECK(plan_device_pings(ring(1))[0].empty());
  const auto two = plan_device_pings(ring(2));
  REQUIRE(two[0].size() == 8);
  CHECK(two[0][3].device == 3);
  CHECK(two[0][3].ip == "10.0.1.13");
  CHECK(two[0][3].peer == "node 1 (host-1)");
  CHECK(two[0][3].peer_device == 3);
  CHECK(two[1][3].ip == "10.0.0.13");  // and back: the ring closes
  const auto four = plan_device_pings(ring(4));
  REQUIRE(four[0].size() == 9);  // the next node from every device, the one across from one
  CHECK(four[0][8].ip == "10.0.2.11");
  CHECK(four[1][8].ip == "10.0.3.12");  // another device of the next node
  const auto sixteen = plan_device_pings(ring(16));
  for (const auto& plan : sixteen) CHECK(plan.size() == 8 + 2);
  CHECK(sixteen[15][0].ip == "10.0.0.10");  // +1, device 0
  CHECK(sixteen[15][8].ip == "10.0.7.10");  // +8, device (15 + 1) % 8
  CHECK(sixteen[15][9].ip == "10.0.3.11");  // +4, device (15 + 2) % 8
  // Every device of every node pings at most kMaxPingsPerDevice times.
  for (const auto& plan : sixteen) {
    for (int d = 0; d < 8; ++d) {
      CHECK(std::count_if(plan.begin(), plan.end(), [&](const DevicePing& p) {
              return p.device == d;
            }) <= static_cast<long>(kMaxPingsPerDevice));
    }
  }
  for (size_t n = 0; n < sixteen.size(); ++n) {
    for (const DevicePing& p : sixteen[n]) CHECK(p.peer != fmt::format("node {} (host-{})", n, n));
  }
}

TEST_CASE("device pings: devices without an address, and nodes with fewer devices, are left out",
          "[health][pings]") {
  auto nodes = ring(2);
  nodes[1].devices[2].ip.clear();
  nodes[1].devices.resize(4);
  const auto plans = plan_device_pings(nodes);
  CHECK(plans[0].size() == 3);  // devices 0, 1, 3
  CHECK(plans[1].size() == 3);
}

TEST_CASE("device pings: the broken end of a ring fails, its neighbours are warned, all named",
          "[health][pings]") {
  const auto nodes = ring(3);
  const auto plans = plan_device_pings(nodes);
  // Node 1's device 5 is unreachable, and cannot reach anything either.
  auto results = answers(plans, {"10.0.1.15"});
  for (PingResult& r : results[1]) {
    if (r.device == 5) r = {5, r.ip, PingAnswer::kUnreached, "recv time out seq=0"};
  }
  const auto findings = judge_device_pings(nodes, plans, results);
  REQUIRE(count(findings[1], HealthStatus::kFail) == 2);
  CHECK(count(findings[0], HealthStatus::kFail) == 0);
  CHECK(count(findings[0], HealthStatus::kWarn) == 1);
  CHECK(count(findings[2], HealthStatus::kWarn) == 1);
  const HealthFinding& on_0 = findings[0][0];
  CHECK(on_0.check == "ping");
  CHECK(on_0.device == 5);
  CHECK(on_0.detail ==
        "node 0 (host-0) device 5 (10.0.0.15) cannot reach node 1 (host-1) device 5 "
        "(10.0.1.15): recv time out seq=0");
  CHECK_THAT(on_0.fix, Contains("hccn_tool -i 5 -ping -g address 10.0.1.15 on node 0 (host-0)"));
  CHECK_THAT(
      findings[1][0].detail + findings[1][1].detail,
      Contains("node 0 (host-0) device 5") && Contains("node 1 (host-1) device 5 (10.0.1.15) "
                                                       "cannot reach node 2 (host-2)"));
  CHECK(count(findings[0], HealthStatus::kPass) == 0);
}

TEST_CASE(
    "device pings: two nodes cannot tell which end is broken, so both fail, and pairs that answer "
    "pass",
    "[health][pings]") {
  const auto nodes = ring(2);
  const auto plans = plan_device_pings(nodes);
  const auto findings = judge_device_pings(nodes, plans, answers(plans, {"10.0.1.13"}));
  REQUIRE(findings[0].size() == 1);
  REQUIRE(findings[1].size() == 1);
  CHECK(findings[0][0].status == HealthStatus::kFail);
  CHECK(findings[1][0].status == HealthStatus::kFail);
  CHECK(findings[0][0].device == 3);
  CHECK(findings[1][0].device == 3);
  CHECK(findings[0][0].detail == findings[1][0].detail);
  const auto fine = judge_device_pings(nodes, plans, answers(plans, {}));
  REQUIRE(fine[0].size() == 1);
  CHECK(fine[0][0].status == HealthStatus::kPass);
  CHECK(fine[0][0].detail == "8 device-plane pings reached");
}

TEST_CASE(
    "device pings: an unanswered ping is not run and blames nobody, unasked answers are ignored",
    "[health][pings]") {
  const auto nodes = ring(2);
  const auto plans = plan_device_pings(nodes);
  auto results = answers(plans, {});
  results[0][2] = {2, "10.0.1.12", PingAnswer::kNotRun, "timed out after 15 s"};
  results[1].push_back({7, "192.0.2.1", PingAnswer::kUnreached, "not asked"});
  const auto findings = judge_device_pings(nodes, plans, results);
  REQUIRE(findings[0].size() == 2);
  CHECK(findings[0][0].status == HealthStatus::kNotRun);
  CHECK(findings[0][1].detail == "7 device-plane pings reached");
  CHECK(findings[0][0].detail ==
        "no answer pinging node 1 (host-1) device 2 (10.0.1.12): timed out after 15 s");
  REQUIRE(findings[1].size() == 1);
  CHECK(findings[1][0].status == HealthStatus::kPass);
}

TEST_CASE("device pings: the node plan's ping run calls hccn_tool -ping and reads its answers",
          "[health][pings]") {
  NodeCheckSettings settings;
  settings.host = "a";
  settings.kind = NodeCheckSettings::Devices::kAscend;
  settings.devices = {0, 1};
  settings.tools.hccn_tool = "/usr/local/Ascend/driver/tools/hccn_tool";
  settings.pings = {{0, "10.0.1.10", "node 1 (b)", 0}, {1, "10.0.1.11", "node 1 (b)", 1}};
  NodeCheckPlan plan(settings);
  const auto calls = plan.first_calls();
  REQUIRE(calls.size() == 2);
  CHECK(calls[1].argv == std::vector<std::string>{settings.tools.hccn_tool, "-i", "1", "-ping",
                                                  "-g", "address", "10.0.1.11"});
  ToolRun reached{calls[0].argv, ToolRun::End::kExited, 0,
                  "device 0 PING 10.0.1.10\nrecv seq=0,time=0.067000ms\n"
                  "3 packets transmitted, 3 received, 0.00% packet loss\n",
                  ""};
  plan.record(calls[0], reached);
  ToolRun lost{calls[1].argv, ToolRun::End::kExited, 1,
               "device 1 PING 10.0.1.11\nrecv time out seq=0\n", "Command execute failed!\n"};
  plan.record(calls[1], lost);
  const NodeVerdict v = plan.verdict();
  REQUIRE(v.pings.size() == 2);
  CHECK(v.pings[0].answer == PingAnswer::kReached);
  CHECK(v.pings[1].answer == PingAnswer::kUnreached);
  CHECK(v.pings[1].ip == "10.0.1.11");
  CHECK(v.pings[1].detail == "recv time out seq=0");

  NodeCheckPlan cut_off(settings);
  const auto again = cut_off.first_calls();
  cut_off.never_ran(again[0], "the health checks' budget (60 s) ran out first");
  CHECK(cut_off.verdict().pings.at(0).answer == PingAnswer::kNotRun);

  settings.tools.hccn_tool.clear();
  NodeCheckPlan no_tool(settings);
  CHECK(no_tool.first_calls().empty());
  CHECK(no_tool.verdict().pings.size() == 2);
}

TEST_CASE("device pings: requests, reports, verdicts and device addresses survive the wire",
          "[health][pings][rdzv]") {
  const PingRequest request{7, {{3, "10.0.1.13", "node 1 (b)", 3}}};
  const auto r = std::get<PingRequest>(
      std::get<ServerMessage>(decode_server_message(encode(ServerMessage{request}))));
  CHECK(r.run == 7);
  CHECK(r.pings.at(0).ip == "10.0.1.13");
  CHECK(r.pings.at(0).peer == "node 1 (b)");
  const PingReport report{7, {{3, "10.0.1.13", PingAnswer::kUnreached, "recv time out"}}};
  const auto p = std::get<PingReport>(
      std::get<ClientMessage>(decode_client_message(encode(ClientMessage{report}))));
  CHECK(p.results.at(0).answer == PingAnswer::kUnreached);
  CHECK(p.results.at(0).detail == "recv time out");
  const PingVerdict verdict{{{"ping", 3, HealthStatus::kFail, "cannot reach", "hccn_tool"}}};
  const auto v = std::get<PingVerdict>(
      std::get<ServerMessage>(decode_server_message(encode(ServerMessage{verdict}))));
  CHECK(v.findings.at(0).status == HealthStatus::kFail);
  NodeVerdict nv;
  nv.host = "a";
  nv.device_ips = {{4, "10.0.0.14"}, {0, "10.0.0.10"}};
  const auto h = std::get<HealthReport>(
      std::get<ClientMessage>(decode_client_message(encode(ClientMessage{HealthReport{nv}}))));
  REQUIRE(h.verdict.device_ips.size() == 2);
  CHECK(h.verdict.device_ips[0].device == 4);  // local-rank order kept
  // A peer that sends too many answers loses its connection, not the server its memory.
  std::string many = R"({"type":"ping_report","run":1,"results":[)";
  for (size_t i = 0; i <= Limits::kMaxPings; ++i) {
    many += std::string(i ? "," : "") +
            R"({"device":0,"ip":"10.0.0.1","answer":"reached","detail":""})";
  }
  many += "]}";
  CHECK(std::holds_alternative<ProtocolError>(decode_client_message(many)));
}

namespace {

struct PingJob {
  RendezvousState state;
  explicit PingJob(int min_nodes, int max_nodes) : state(settings(min_nodes, max_nodes), t0) {}
  static JobSettings settings(int min_nodes, int max_nodes) {
    JobSettings s;
    s.run_id = "job";
    s.min_nodes = min_nodes;
    s.max_nodes = max_nodes;
    s.last_call = std::chrono::seconds(2);
    return s;
  }
  void join(ClientId id, std::optional<int> rank) {
    state.on_message(id, Hello{kMagic, kProtocolVersion, "job", ""}, t0);
    Join j;
    j.node.host = "host-" + std::to_string(id);
    j.node.addr = "10.1.0." + std::to_string(id);
    j.node.nproc = 8;
    j.node_rank = rank;
    j.min_nodes = state.settings().min_nodes;
    j.max_nodes = state.settings().max_nodes;
    j.health = HealthMode::kGate;
    state.on_message(id, j, t0);
  }
  std::vector<Outgoing> verdict(ClientId id, int node) {
    NodeVerdict v;
    v.host = "host-" + std::to_string(id);
    v.device_ips = addresses(node);
    return state.on_message(id, HealthReport{v}, t0);
  }
  // Agents 1-3 join without node ranks and pass their checks (node n's devices at 10.0.n.x):
  // what the last verdict brings, the ping requests.
  std::vector<Outgoing> three_unranked_checked() {
    for (ClientId id = 1; id <= 3; ++id) join(id, std::nullopt);
    verdict(1, 0);
    verdict(2, 1);
    return verdict(3, 2);
  }
  // The node's answers: every ping reached except those to `dead`.
  std::vector<Outgoing> answer(ClientId id, const PingRequest& request,
                               const std::vector<std::string>& dead = {}, Now now = t0) {
    return state.on_message(id, PingReport{request.run, answers({request.pings}, dead)[0]}, now);
  }
};

}  // namespace

TEST_CASE("device pings in the rendezvous: the round waits for every answer, then forms",
          "[rdzv][health][pings]") {
  PingJob job(2, 2);
  job.join(1, 0);
  job.join(2, 1);
  CHECK(job.verdict(1, 0).empty());
  const auto asked = job.verdict(2, 1);
  const PingRequest* to_1 = message_to<PingRequest>(asked, 1);
  const PingRequest* to_2 = message_to<PingRequest>(asked, 2);
  REQUIRE(to_1 != nullptr);
  REQUIRE(to_2 != nullptr);
  CHECK(to_1->pings.size() == 8);
  CHECK(to_1->pings[0].peer == "node 1 (host-2)");
  CHECK(message_to<Assigned>(asked, 1) == nullptr);
  CHECK(job.answer(1, *to_1).empty());  // node 2's answers are still out
  const auto formed = job.answer(2, *to_2);
  REQUIRE(message_to<PingVerdict>(formed, 1) != nullptr);
  CHECK(message_to<PingVerdict>(formed, 1)->findings.at(0).status == HealthStatus::kPass);
  CHECK(message_to<Assigned>(formed, 1) != nullptr);
  CHECK(message_to<Assigned>(formed, 2) != nullptr);
  CHECK(job.state.phase() == RendezvousState::Phase::kRunning);
}

TEST_CASE(
    "device pings in the rendezvous: an unreached pair of a static job ends it, named on "
    "both nodes",
    "[rdzv][health][pings]") {
  PingJob job(2, 2);
  job.join(1, 0);
  job.join(2, 1);
  job.verdict(1, 0);
  const auto asked = job.verdict(2, 1);
  const PingRequest request_1 = *message_to<PingRequest>(asked, 1);
  job.answer(2, *message_to<PingRequest>(asked, 2));
  const auto out = job.answer(1, request_1, {"10.0.1.13"});
  const std::string pair =
      "node 0 (host-1) device 3 (10.0.0.13) cannot reach node 1 (host-2) device 3 (10.0.1.13)";
  for (ClientId id : {1, 2}) {
    const PingVerdict* v = message_to<PingVerdict>(out, id);
    REQUIRE(v != nullptr);
    REQUIRE(v->findings.size() == 1);
    CHECK_THAT(v->findings[0].detail, Contains(pair));
    const ErrorReply* e = message_to<ErrorReply>(out, id);
    REQUIRE(e != nullptr);
    CHECK(e->code == "health_gate");
    CHECK_THAT(e->message, Contains("2 of 2 nodes failed the health gate") &&
                               Contains("node 0 (host-1): ping device 3: " + pair) &&
                               Contains("node 1 (host-2): ping device 3: " + pair));
  }
  CHECK(job.state.final_decision()->exit_code == kExitHealth);
}

TEST_CASE("device pings in the rendezvous: an elastic job forms without the broken end",
          "[rdzv][health][pings]") {
  PingJob job(2, 3);
  const auto asked = job.three_unranked_checked();
  // Node 2's device 5 neither answers nor reaches its ring neighbour.
  job.answer(1, *message_to<PingRequest>(asked, 1), {"10.0.1.15"});
  job.answer(2, *message_to<PingRequest>(asked, 2), {"10.0.2.15"});
  const auto judged = job.answer(3, *message_to<PingRequest>(asked, 3));
  CHECK(message_to<PingVerdict>(judged, 2)->findings.at(0).status == HealthStatus::kFail);
  CHECK(message_to<PingVerdict>(judged, 1)->findings.at(0).status == HealthStatus::kWarn);
  CHECK(message_to<Assigned>(judged, 1) == nullptr);  // MIN met: the last call runs first
  const auto formed = job.state.on_tick(t0 + std::chrono::seconds(3));
  const Assigned* a = message_to<Assigned>(formed, 1);
  REQUIRE(a != nullptr);
  CHECK(a->nnodes == 2);
  CHECK(message_to<Assigned>(formed, 2) == nullptr);
  CHECK(message_to<Assigned>(formed, 3) != nullptr);
  const JobStatus status = job.state.status(t0 + std::chrono::seconds(3));
  REQUIRE(status.nodes.size() == 3);
  CHECK(status.nodes[2].state == "excluded");
}

TEST_CASE(
    "device pings in the rendezvous: a node that leaves mid-run makes a new ring, and "
    "late answers to the old one are dropped",
    "[rdzv][health][pings]") {
  PingJob job(2, 3);
  const auto first = job.three_unranked_checked();
  const PingRequest old_request = *message_to<PingRequest>(first, 1);
  job.state.on_disconnect(3, t0);
  // The two left are pinged once the last call for a third has passed.
  CHECK(message_to<PingRequest>(job.state.on_tick(t0 + std::chrono::seconds(1)), 1) == nullptr);
  const auto asked = job.state.on_tick(t0 + std::chrono::seconds(3));
  const PingRequest* again = message_to<PingRequest>(asked, 1);
  REQUIRE(again != nullptr);
  CHECK(again->run == old_request.run + 1);
  CHECK(again->pings.size() == 8);  // a ring of two now
  CHECK(job.answer(1, old_request).empty());
  const PingRequest request_2 = *message_to<PingRequest>(asked, 2);
  const Now later = t0 + std::chrono::seconds(3);
  job.answer(1, *again, {}, later);
  const auto formed = job.answer(2, request_2, {}, later);
  CHECK(message_to<Assigned>(formed, 1) != nullptr);
  CHECK(message_to<Assigned>(formed, 2) != nullptr);
}

}  // namespace test_device_pings
