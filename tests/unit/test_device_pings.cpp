// The device-plane pings: who pings whom (a ring of same-index devices, chords for larger jobs,
// never more than kMaxPingsPerDevice per device), what unreached pairs mean for each end, the
// node plan's ping run and the messages' codec (the rendezvous' side: test_ping_rounds.cpp).
#include <fmt/format.h>

#include <catch2/catch.hpp>

#include "health/device_pings.hpp"
#include "health/node_checks.hpp"
#include "rendezvous/protocol/protocol.hpp"
#include "support/ping_fixtures.hpp"

namespace test_device_pings {

using namespace npu_run;
using namespace npu_run::rdzv;
using Catch::Matchers::Contains;
using namespace npu_run::testing::ping_fixtures;

namespace {

std::vector<PingNode> ring(int nodes, int devices = 8) {
  std::vector<PingNode> out;
  for (int n = 0; n < nodes; ++n) {
    out.push_back({fmt::format("node {} (host-{})", n, n), addresses(n, devices)});
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

}  // namespace test_device_pings
