// The pre-flight probe (issue 48 point 3) as the rendezvous runs it: a run's steps, requests and
// answers (rendezvous/state/probe_run.hpp), and the state machine that waits for them before a
// round forms, failing the health gate of the nodes found slow (rendezvous/state/state_probe.cpp).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <catch2/catch.hpp>
#include <set>

#include "rendezvous/protocol/protocol.hpp"
#include "rendezvous/state/probe_run.hpp"
#include "support/rdzv_job.hpp"

namespace test_probe_run {

using namespace npu_run::testing::rdzv_job;
using Catch::Matchers::Contains;
using npu_run::PreflightMode;
using npu_run::testing::message_to;

namespace {

std::vector<ProbeNode> probe_nodes(int n) {
  std::vector<ProbeNode> nodes;
  for (int i = 0; i < n; ++i)
    nodes.push_back({"node-" + std::to_string(i), "10.0.0." + std::to_string(i), 40000 + i});
  return nodes;
}

// Every asked node answers: 50 ms matmuls and 20 ms all_gathers, `slow` ones `factor` times
// as long; `broken` ones fail.
void answer_all(ProbeRun& run, const std::set<size_t>& slow = {}, double factor = 1,
                const std::set<size_t>& broken = {}) {
  for (const auto& [node, request] : run.requests()) {
    ProbeReport r;
    r.run = run.id();
    const double f = slow.contains(node) ? factor : 1.0;
    r.matmul_us = request.matmul ? static_cast<int64_t>(50'000 * f) : 0;
    r.gather_us = static_cast<int64_t>(20'000 * f) + static_cast<int64_t>(node);
    if (broken.contains(node)) r = ProbeReport{run.id(), 0, 0, true, "ModuleNotFoundError: torch"};
    run.answer(node, r);
  }
}

}  // namespace

TEST_CASE("probe run: neighbours meet on the first node's store, a healthy run fails nobody",
          "[preflight]") {
  ProbeRun run(7, probe_nodes(4), PreflightMode::kQuick, 1'000);
  const auto asked = run.requests();
  REQUIRE(asked.size() == 4);
  CHECK(asked[1].first == 1);
  CHECK(asked[1].second.group == "7.1.0");
  CHECK(asked[1].second.rank == 1);
  CHECK(asked[1].second.size == 2);
  CHECK(asked[1].second.store_addr == "10.0.0.0");  // node 0 leads the pair
  CHECK(asked[1].second.store_port == 40000);
  CHECK(asked[3].second.store_addr == "10.0.0.2");
  CHECK(asked[3].second.matmul);
  CHECK(asked[3].second.timeout_ms == ProbeRun::timeout_ms(PreflightMode::kQuick));
  CHECK_FALSE(run.step_done());
  answer_all(run);
  REQUIRE(run.step_done());
  CHECK_FALSE(run.advance(4'500));
  CHECK(run.failed().empty());
  REQUIRE_FALSE(run.notes().empty());
  CHECK_THAT(run.notes()[0], Contains("pre-flight probe (quick, 4 nodes, 3.5 s): matmul median "
                                      "0.050 s, all_gather median 0.020 s"));
}

TEST_CASE("probe run: a slow node is found in two steps, a slow matmul in one", "[preflight]") {
  SECTION("a slow all_gather: its pair, then the suspect with a good partner") {
    // Node 3's all_gathers take 5x as long; its matmul is fine.
    ProbeRun slow(2, probe_nodes(6), PreflightMode::kQuick, 0);
    for (const auto& [node, request] : slow.requests())
      slow.answer(node,
                  ProbeReport{2, 50'000, node == 2 || node == 3 ? 100'000 : 20'000, false, ""});
    REQUIRE(slow.advance(0));
    CHECK(slow.step() == 2);
    const auto second = slow.requests();
    REQUIRE(second.size() == 4);  // 2 and 3, each with a node of a good pair
    CHECK_FALSE(second[0].second.matmul);
    answer_all(slow, {3}, 5);
    CHECK_FALSE(slow.advance(0));
    REQUIRE(slow.failed().size() == 1);
    CHECK_THAT(slow.failed().at(3),
               Contains("node-3: all_gather with good node-") && Contains("x the median 0.020 s"));
  }
  SECTION("a slow matmul is named at once") {
    ProbeRun run(3, probe_nodes(4), PreflightMode::kQuick, 0);
    for (const auto& [node, request] : run.requests())
      run.answer(node, ProbeReport{3, node == 2 ? 400'000 : 50'000, 20'000, false, ""});
    CHECK_FALSE(run.advance(0));
    REQUIRE(run.failed().size() == 1);
    CHECK_THAT(run.failed().at(2), Contains("node-2: matmul 0.400 s, 8.0x the median 0.050 s"));
  }
}

TEST_CASE(
    "probe run: a failing probe is named with what it said, a probe nowhere runs is no "
    "verdict",
    "[preflight]") {
  ProbeRun run(4, probe_nodes(4), PreflightMode::kQuick, 0);
  answer_all(run, {}, 1, {1});
  REQUIRE(run.advance(0));
  answer_all(run, {}, 1, {1});
  CHECK_FALSE(run.advance(0));
  REQUIRE(run.failed().contains(1));
  CHECK_THAT(run.failed().at(1),
             Contains("failed") && Contains("(its probe: ModuleNotFoundError: torch)"));

  ProbeRun nowhere(5, probe_nodes(2), PreflightMode::kQuick, 0);
  answer_all(nowhere, {}, 1, {0, 1});
  CHECK_FALSE(nowhere.advance(0));
  CHECK(nowhere.failed().empty());
  CHECK_THAT(nowhere.notes().back(), Contains("no node's probe ran (node-0: ModuleNotFoundError"));
  // One node launched without --preflight answers so; its partner waited out the bound.
  ProbeRun mixed(6, probe_nodes(2), PreflightMode::kQuick, 0);
  mixed.answer(0, ProbeReport{6, 0, 0, true, "no answer within 60.0 s (stopped)"});
  mixed.answer(1, ProbeReport{6, 0, 0, true, "this node runs with --preflight off"});
  CHECK_FALSE(mixed.advance(0));
  CHECK_THAT(mixed.notes().back(), Contains("(node-1: this node runs with --preflight off)"));
}

TEST_CASE("probe run: full ends with the whole group of the nodes that passed", "[preflight]") {
  ProbeRun run(6, probe_nodes(5), PreflightMode::kFull, 0);
  for (const auto& [node, request] : run.requests()) {
    CHECK(request.full);
    run.answer(node, ProbeReport{6, node == 4 ? 300'000 : 50'000, 20'000, false, ""});
  }
  REQUIRE(run.advance(0));
  CHECK(run.step() == 3);
  const auto whole = run.requests();
  REQUIRE(whole.size() == 4);  // node 4's matmul failed it
  CHECK(whole[0].second.size == 4);
  answer_all(run);
  CHECK_FALSE(run.advance(0));
  CHECK(run.failed().size() == 1);
  CHECK_THAT(fmt::format("{}", fmt::join(run.notes(), "\n")),
             Contains("all_gather median 0.020 s, the 4 nodes that passed together 0.020 s"));
}

namespace {

JobSettings probed(int min_nodes, int max_nodes) {
  JobSettings s = settings(max_nodes);
  s.min_nodes = min_nodes;
  s.last_call = 10s;
  s.preflight = PreflightMode::kQuick;
  return s;
}

// Each node answers its request: `slow` ones' matmuls take 8x as long.
std::vector<Outgoing> answer(Job& job, const std::vector<Outgoing>& asked, ClientId id,
                             bool slow = false) {
  const ProbeRequest* r = message_to<ProbeRequest>(asked, id);
  REQUIRE(r != nullptr);
  return job.send(id, ProbeReport{r->run, r->matmul ? (slow ? 400'000 : 50'000) : 0, 20'000, false,
                                  "1 device(s), gloo"});
}

std::vector<Outgoing> join_elastic(Job& job, ClientId id, int min_nodes, int max_nodes) {
  job.greet(id);
  Join j = join_as(node("host-" + std::to_string(id)), std::nullopt, max_nodes);
  j.min_nodes = min_nodes;
  j.agent = "agent-" + std::to_string(id);
  return job.send(id, j);
}

}  // namespace

TEST_CASE("probe in the rendezvous: the round waits for the probe, then forms with its notes",
          "[preflight][rdzv]") {
  Job job(probed(2, 2));
  CHECK(job.join(1, node("a")).empty());
  const auto asked = job.join(2, node("bb"));
  REQUIRE(message_to<ProbeRequest>(asked, 1) != nullptr);
  REQUIRE(message_to<Assigned>(asked, 1) == nullptr);
  CHECK(answer(job, asked, 1).empty());
  // A late answer of another run changes nothing.
  CHECK(job.send(2, ProbeReport{99, 1, 1, false, ""}).empty());
  const auto formed = answer(job, asked, 2);
  const Assigned* a = message_to<Assigned>(formed, 2);
  REQUIRE(a != nullptr);
  REQUIRE_FALSE(a->probe_notes.empty());
  CHECK_THAT(a->probe_notes[0], Contains("pre-flight probe (quick, 2 nodes"));
  // Encoded and decoded as the agents see them.
  const auto wire = std::get<ServerMessage>(
      decode_server_message(encode(ServerMessage{*message_to<ProbeRequest>(asked, 2)})));
  CHECK(std::get<ProbeRequest>(wire).group == message_to<ProbeRequest>(asked, 2)->group);
  const auto back = std::get<ClientMessage>(
      decode_client_message(encode(ClientMessage{ProbeReport{3, 5, 6, true, "why"}})));
  CHECK(std::get<ProbeReport>(back).detail == "why");
}

TEST_CASE("probe in the rendezvous: a slow node ends a static job with the health gate's exit",
          "[preflight][rdzv]") {
  Job job(probed(4, 4));
  std::vector<Outgoing> asked;
  for (ClientId id = 1; id <= 4; ++id) asked = job.join(id, node(std::string(id, 'h')));
  for (ClientId id = 1; id <= 3; ++id) answer(job, asked, id, id == 3);
  const auto out = answer(job, asked, 4);
  const ErrorReply e = error_to(out, 1);
  CHECK(e.code == "health_gate");
  CHECK_THAT(e.message, Contains("1 of 4 nodes failed the health gate; no worker started") &&
                            Contains("hhh (10.0.0.3): preflight: matmul 0.400 s, 8.0x the median"));
  REQUIRE(job.state.final_decision());
  CHECK(job.state.final_decision()->exit_code == npu_run::kExitHealth);
}

TEST_CASE("probe in the rendezvous: an elastic job forms without the slow node",
          "[preflight][rdzv]") {
  Job job(probed(2, 3));
  std::vector<Outgoing> asked;
  for (ClientId id = 1; id <= 3; ++id) asked = join_elastic(job, id, 2, 3);
  answer(job, asked, 1);
  answer(job, asked, 2, true);
  // Two nodes are left, MIN but not MAX: the round forms at the last call, as after a failed gate.
  CHECK(message_to<Assigned>(answer(job, asked, 3), 1) == nullptr);
  const auto formed = job.state.on_tick(Now{t0.steady + 11s, t0.wall_ms + 11'000});
  REQUIRE(message_to<Assigned>(formed, 1) != nullptr);
  REQUIRE(message_to<Assigned>(formed, 3) != nullptr);
  CHECK(message_to<Assigned>(formed, 2) == nullptr);  // kept out, waiting
  CHECK(message_to<Assigned>(formed, 1)->nnodes == 2);
}

TEST_CASE("probe in the rendezvous: a spare takes the slow node's seat once it is probed too",
          "[preflight][rdzv][spares]") {
  JobSettings s = with_spares(2, 1);
  s.preflight = PreflightMode::kQuick;
  Job job(s);
  std::vector<Outgoing> asked;
  for (ClientId id = 1; id <= 3; ++id) {
    job.greet(id);
    Join j = join_as(node(std::string(id, 'n')), std::nullopt, 2);
    j.spares = 1;
    const auto out = job.send(id, j);
    if (id == 2) asked = out;  // the first two are probed; the third waits for that run
    if (id == 3) CHECK(out.empty());
  }
  answer(job, asked, 1);
  const auto out = answer(job, asked, 2, true);
  const Dismissed* d = message_to<Dismissed>(out, 2);
  REQUIRE(d != nullptr);
  CHECK_THAT(d->reason,
             Contains("failed its health gate (preflight: matmul 0.400 s, 8.0x the median") &&
                 Contains("a spare takes its place"));
  // The spare's round is probed before it forms: node 1 again, with the spare.
  REQUIRE(message_to<ProbeRequest>(out, 3) != nullptr);
  CHECK(message_to<Assigned>(out, 1) == nullptr);
  answer(job, out, 1);
  const auto formed = answer(job, out, 3);
  REQUIRE(message_to<Assigned>(formed, 1) != nullptr);
  REQUIRE(message_to<Assigned>(formed, 3) != nullptr);
}

}  // namespace test_probe_run
