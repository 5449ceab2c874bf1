// The device-plane pings in the rendezvous: a round waits for every node's answers, a static job
// ends on an unreached pair, an elastic one forms without the broken end, and a member's later
// verdict keeps what the pings found.
#include <catch2/catch.hpp>

#include "health/device_pings.hpp"
#include "rendezvous/protocol/protocol.hpp"
#include "rendezvous/state/state.hpp"
#include "support/outgoing.hpp"
#include "support/ping_fixtures.hpp"

namespace test_ping_rounds {

using namespace npu_run;
using namespace npu_run::rdzv;
using Catch::Matchers::Contains;
using npu_run::testing::message_to;
using namespace npu_run::testing::ping_fixtures;

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

TEST_CASE("device pings in the rendezvous: a member's whole verdict keeps its pings' findings",
          "[rdzv][health][pings]") {
  PingJob job(2, 2);
  job.join(1, 0);
  job.join(2, 1);
  job.verdict(1, 0);
  const auto asked = job.verdict(2, 1);
  job.answer(1, *message_to<PingRequest>(asked, 1));
  job.answer(2, *message_to<PingRequest>(asked, 2));
  REQUIRE(job.state.phase() == RendezvousState::Phase::kRunning);
  // Node 0's warning-only checks end after the round formed: their verdict follows.
  NodeVerdict whole;
  whole.host = "host-1";
  whole.device_ips = addresses(0);
  whole.findings.push_back({"optical", 2, HealthStatus::kWarn, "no optical module present", {}});
  CHECK(job.state.on_message(1, HealthReport{whole}, t0).empty());
  const JobStatus status = job.state.status(t0);
  REQUIRE_FALSE(status.nodes.empty());
  REQUIRE(status.nodes[0].health);
  std::vector<std::string> checks;
  for (const HealthFinding& f : status.nodes[0].health->findings) checks.push_back(f.check);
  CHECK(checks == std::vector<std::string>{"optical", "ping"});
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

}  // namespace test_ping_rounds
