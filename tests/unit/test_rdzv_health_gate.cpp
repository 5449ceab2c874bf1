// The health gate in the rendezvous state machine: rounds wait for the gating joiners' verdicts,
// a static job a node failed ends before any worker starts, an elastic one forms without it and
// takes it back when a recheck passes; the job checks across verdicts; the messages' codec.
#include <catch2/catch.hpp>

#include "rendezvous/protocol/protocol.hpp"
#include "rendezvous/state/state.hpp"
#include "support/outgoing.hpp"

namespace test_rdzv_health_gate {

using namespace npu_run;
using namespace npu_run::rdzv;
using Catch::Matchers::Contains;
using npu_run::testing::message_to;
using namespace std::chrono_literals;

namespace {

const Now t0{Clock::time_point{}, 1'700'000'000'000};

struct GateJob {
  RendezvousState state;
  GateJob(int min_nodes, int max_nodes, bool strict = false)
      : state(settings(min_nodes, max_nodes, strict), t0) {}

  static JobSettings settings(int min_nodes, int max_nodes, bool strict) {
    JobSettings s;
    s.run_id = "job";
    s.min_nodes = min_nodes;
    s.max_nodes = max_nodes;
    s.last_call = 2s;
    s.strict_consistency = strict;
    return s;
  }
  std::vector<Outgoing> join(ClientId id, const std::string& host,
                             HealthMode mode = HealthMode::kGate,
                             std::optional<int> rank = std::nullopt, Now now = t0) {
    state.on_message(id, Hello{kMagic, kProtocolVersion, "job", ""}, now);
    Join j;
    j.node.host = host;
    j.node.addr = "10.0.0." + std::to_string(id);
    j.node.nproc = 8;
    j.node_rank = rank;
    j.min_nodes = state.settings().min_nodes;
    j.max_nodes = state.settings().max_nodes;
    j.health = mode;
    return state.on_message(id, j, now);
  }
  std::vector<Outgoing> verdict(ClientId id, NodeVerdict v, Now now = t0) {
    return state.on_message(id, HealthReport{std::move(v)}, now);
  }
};

NodeVerdict healthy(const std::string& host, int tls = 0, const std::string& buffsize = "200") {
  NodeVerdict v;
  v.host = host;
  v.omitted_passes = 48;
  for (int d = 0; d < 8; ++d) v.tls_switch[d] = tls;
  v.settings = {{"HCCL_BUFFSIZE", buffsize}, {"script_sha256", "ab12"}};
  return v;
}

NodeVerdict link_down(const std::string& host, int device) {
  NodeVerdict v = healthy(host);
  v.findings.push_back({"link", device, HealthStatus::kFail, "link status: DOWN",
                        "check the cable, optical module and switch port"});
  return v;
}

}  // namespace

TEST_CASE("health gate: a static round waits for every verdict, then ends on a failed one",
          "[rdzv][health]") {
  GateJob job(4, 4);
  for (ClientId id = 1; id <= 4; ++id) {
    CHECK(job.join(id, "host-" + std::to_string(id), HealthMode::kGate, int(id - 1)).empty());
  }
  CHECK(job.state.status(t0).nodes[0].state == "checking");
  CHECK(job.verdict(1, healthy("host-1")).empty());
  CHECK(job.verdict(2, healthy("host-2")).empty());
  CHECK(job.verdict(4, healthy("host-4")).empty());
  const auto out = job.verdict(3, link_down("host-3", 5));
  for (ClientId id = 1; id <= 4; ++id) {
    const ErrorReply* e = message_to<ErrorReply>(out, id);
    REQUIRE(e != nullptr);
    CHECK(e->code == "health_gate");
    CHECK_THAT(e->message, Contains("1 of 4 nodes failed the health gate; no worker started") &&
                               Contains("node 2 (host-3): link device 5: link status: DOWN "
                                        "(fix: check the cable"));
  }
  REQUIRE(job.state.final_decision());
  CHECK(job.state.final_decision()->exit_code == kExitHealth);
  CHECK(job.state.final_decision()->root_cause->node_rank == 2);
  CHECK(job.state.phase() == RendezvousState::Phase::kFinished);
}

TEST_CASE("health gate: passing verdicts start the round, with the job checks' warnings",
          "[rdzv][health]") {
  GateJob job(3, 3);
  job.join(1, "a");
  job.join(2, "b");
  job.join(3, "c");
  job.verdict(1, healthy("a"));
  job.verdict(2, healthy("b", 0, "400"));
  const auto out = job.verdict(3, healthy("c"));
  const Assigned* a = message_to<Assigned>(out, 2);
  REQUIRE(a != nullptr);
  REQUIRE(a->health_notes.size() == 1);
  CHECK(a->health_notes[0] ==
        "HCCL_BUFFSIZE differs between nodes: 200 on 2 of 3 nodes; 400 on b (10.0.0.2)");
  CHECK(job.state.status(t0).nodes[1].health->omitted_passes == 48);
}

TEST_CASE("health gate: --strict-consistency fails the odd node, and a TLS switch always does",
          "[rdzv][health]") {
  GateJob strict(3, 3, /*strict=*/true);
  strict.join(1, "a");
  strict.join(2, "b");
  strict.join(3, "c");
  strict.verdict(1, healthy("a"));
  strict.verdict(2, healthy("b", 0, "400"));
  auto out = strict.verdict(3, healthy("c"));
  REQUIRE(message_to<ErrorReply>(out, 1) != nullptr);
  CHECK_THAT(message_to<ErrorReply>(out, 1)->message,
             Contains("b (10.0.0.2): consistency: HCCL_BUFFSIZE is 400 here but 200 on the other "
                      "nodes (--strict-consistency)"));

  GateJob tls(3, 3);
  tls.join(1, "a");
  tls.join(2, "b");
  tls.join(3, "c");
  tls.verdict(1, healthy("a"));
  tls.verdict(2, healthy("b", 1));
  out = tls.verdict(3, healthy("c"));
  REQUIRE(message_to<ErrorReply>(out, 3) != nullptr);
  CHECK_THAT(message_to<ErrorReply>(out, 3)->message,
             Contains("b (10.0.0.2): tls: the TLS switch is 1 on devices 0,1,2,3,4,5,6,7 of this "
                      "node but 0 on 16 other devices of the job"));
}

TEST_CASE("health gate: an elastic job forms without the failed node and takes it back",
          "[rdzv][health]") {
  GateJob job(2, 3);
  job.join(1, "a");
  job.join(2, "b");
  job.join(3, "c");
  job.verdict(1, healthy("a"));
  job.verdict(2, link_down("b", 5));
  CHECK(job.verdict(3, healthy("c")).empty());  // MIN ready: the last call begins
  const auto out = job.state.on_tick(t0 + 3s);
  REQUIRE(message_to<Assigned>(out, 1) != nullptr);
  CHECK(message_to<Assigned>(out, 1)->nnodes == 2);
  CHECK(message_to<Assigned>(out, 2) == nullptr);
  const JobStatus status = job.state.status(t0 + 3s);
  REQUIRE(status.nodes.size() == 3);
  CHECK(status.nodes[2].host == "b");
  CHECK(status.nodes[2].state == "excluded");
  CHECK(status.nodes[2].health->failed());
  // Its recheck passes: the job re-forms to take it in.
  const auto reform = job.verdict(2, healthy("b"), t0 + 40s);
  REQUIRE(message_to<Reform>(reform, 1) != nullptr);
  CHECK_THAT(message_to<Reform>(reform, 1)->reason, Contains("passed its health checks"));
}

TEST_CASE("health gate: a node that only warns runs, and every node is told", "[rdzv][health]") {
  GateJob job(2, 2);
  job.join(1, "a", HealthMode::kWarn);
  const auto out = job.join(2, "b", HealthMode::kWarn);  // no verdict awaited
  REQUIRE(message_to<Assigned>(out, 1) != nullptr);
  CHECK(job.verdict(2, link_down("b", 5)).empty());
  CHECK(job.state.status(t0).nodes[1].health->failed());
}

TEST_CASE("health gate: a verdict from an agent that has not joined is refused", "[rdzv][health]") {
  GateJob job(2, 2);
  job.state.on_message(9, Hello{kMagic, kProtocolVersion, "job", ""}, t0);
  const auto out = job.verdict(9, healthy("x"));
  REQUIRE(message_to<ErrorReply>(out, 9) != nullptr);
  CHECK(message_to<ErrorReply>(out, 9)->code == "protocol_order");
}

TEST_CASE("health gate: joins and verdicts on the wire, every field checked", "[rdzv][health]") {
  Join join;
  join.node.host = "a";
  join.node.addr = "10.0.0.1";
  join.node.worker_port = 40000;
  join.node.devices = {0};
  join.health = HealthMode::kGate;
  const auto decoded = decode_client_message(encode(ClientMessage{join}));
  if (const auto* error = std::get_if<ProtocolError>(&decoded)) FAIL(error->message);
  CHECK(std::get<Join>(std::get<ClientMessage>(decoded)).health == HealthMode::kGate);

  const NodeVerdict v = link_down("b", 5);
  const auto back = decode_client_message(encode(ClientMessage{HealthReport{v}}));
  REQUIRE(std::holds_alternative<ClientMessage>(back));
  const NodeVerdict& got = std::get<HealthReport>(std::get<ClientMessage>(back)).verdict;
  CHECK(got.findings.size() == 1);
  CHECK(got.findings[0].detail == "link status: DOWN");
  CHECK(got.tls_switch == v.tls_switch);
  CHECK(got.settings == v.settings);
  CHECK(got.omitted_passes == 48);

  const auto bad = decode_client_message(
      R"({"type":"health","verdict":{"host":"a","elapsed_ms":1,"passed":0,"findings":[{"check":"link","device":1,"status":"dreadful","detail":"x"}],"tls_switch":{},"settings":{}}})");
  REQUIRE(std::holds_alternative<ProtocolError>(bad));
  CHECK_THAT(std::get<ProtocolError>(bad).message, Contains("unknown status 'dreadful'"));
}

}  // namespace test_rdzv_health_gate
