// The rendezvous state machine, driven directly: elastic jobs (--nnodes MIN:MAX) forming, losing
// and gaining nodes, re-forming without charging a restart.
#include <catch2/catch.hpp>

#include "rendezvous/state/state.hpp"
#include "support/rdzv_job.hpp"

namespace test_rdzv_elastic {

using namespace npu_run::rdzv;
using namespace npu_run::testing::rdzv_job;
using Catch::Matchers::Contains;
using npu_run::testing::message_to;
using namespace std::chrono_literals;

namespace {

JobSettings elastic(int min_nodes, int max_nodes, int max_restarts = 0) {
  JobSettings s = settings(max_nodes, max_restarts);
  s.min_nodes = min_nodes;
  s.last_call = 2s;
  return s;
}

// Greets `id` and joins it to an elastic job at `now`.
std::vector<Outgoing> join_elastic(Job& job, ClientId id, const NodeInfo& n, Now now = t0) {
  job.greet(id);
  Join j =
      join_as(n, std::nullopt, job.state.settings().max_nodes, job.state.settings().max_restarts);
  j.min_nodes = job.state.settings().min_nodes;
  return job.send(id, j, now);
}

}  // namespace

TEST_CASE("rdzv elastic: MIN nodes start after the last call and MAX start at once", "[rdzv]") {
  Job job(elastic(2, 4));
  CHECK(join_elastic(job, 1, node("a")).empty());
  CHECK(join_elastic(job, 2, node("b"), t0 + 1s).empty());  // MIN reached: the last call begins
  CHECK(job.state.on_tick(t0 + 2s).empty());
  const auto out = job.state.on_tick(t0 + 3500ms);
  REQUIRE(message_to<Assigned>(out, 1) != nullptr);
  CHECK(message_to<Assigned>(out, 1)->nnodes == 2);
  CHECK(message_to<Assigned>(out, 2)->world_size == 4);  // two workers per node

  Job full(elastic(2, 3));
  join_elastic(full, 1, node("a"));
  join_elastic(full, 2, node("b"));
  const auto all = join_elastic(full, 3, node("c"));
  REQUIRE(message_to<Assigned>(all, 3) != nullptr);
  CHECK(message_to<Assigned>(all, 3)->nnodes == 3);
  CHECK(message_to<Assigned>(all, 3)->node_rank == 2);  // dense, by host name
}

TEST_CASE("rdzv elastic: a lost node re-forms the survivors, a restart --max-restarts does not pay",
          "[rdzv]") {
  Job job(elastic(2, 3, 1));
  join_elastic(job, 1, node("a"));
  join_elastic(job, 2, node("b"));
  join_elastic(job, 3, node("c"));
  auto out = job.state.on_disconnect(2, t0 + 1s);
  REQUIRE(message_to<StopWorkers>(out, 1) != nullptr);
  job.send(1, Report{0, Outcome::kStopped, std::nullopt, 0}, t0 + 1s);
  out = job.send(3, Report{0, Outcome::kStopped, std::nullopt, 0}, t0 + 1s);
  const Decision* d = message_to<Decision>(out, 1);
  REQUIRE(d != nullptr);
  CHECK(d->action == Action::kRestart);
  CHECK(d->restart_count == 1);
  CHECK(d->restarts_charged == 0);  // the node's fault: the job went on without it
  CHECK(d->failure_class == FailureClass::kInfrastructure);
  CHECK_THAT(d->class_reason, Contains("infrastructure: node 1 (b) was lost"));
  CHECK_FALSE(d->membership_change);
  CHECK(message_to<Decision>(out, 2) == nullptr);  // the lost node hears nothing
  Join rejoin = join_as(node("a"), std::nullopt, 3, 1);
  rejoin.min_nodes = 2;
  CHECK(job.send(1, rejoin, t0 + 2s).empty());
  rejoin.node = node("c");
  CHECK(job.send(3, rejoin, t0 + 2s).empty());
  out = job.state.on_tick(t0 + 4500ms);
  const Assigned* a = message_to<Assigned>(out, 3);
  REQUIRE(a != nullptr);
  CHECK(a->nnodes == 2);
  CHECK(a->node_rank == 1);
  CHECK(a->restart_count == 1);
  CHECK(a->round == 1);
}

TEST_CASE("rdzv elastic: below MIN the survivors wait, then time out naming the shortfall",
          "[rdzv]") {
  JobSettings s = elastic(2, 3);
  s.join_timeout = 10s;
  s.max_restarts = 1;
  Job job(s);
  join_elastic(job, 1, node("a"));
  join_elastic(job, 2, node("b"), t0 + 2s);
  job.state.on_tick(t0 + 4500ms);  // round 0 with 2 nodes
  job.state.on_disconnect(2, t0 + 5s);
  const auto out = job.send(1, Report{0, Outcome::kStopped, std::nullopt, 0}, t0 + 5s);
  REQUIRE(message_to<Decision>(out, 1)->action == Action::kRestart);
  Join rejoin = join_as(node("a"), std::nullopt, 3, 1);
  rejoin.min_nodes = 2;
  CHECK(job.send(1, rejoin, t0 + 6s).empty());
  CHECK(job.send(1, Heartbeat{}, t0 + 14s).size() == 1);
  const auto waiting = job.state.on_tick(t0 + 14s);  // one node is below MIN: no round
  CHECK(message_to<Assigned>(waiting, 1) == nullptr);
  CHECK(message_to<ErrorReply>(waiting, 1) == nullptr);
  const auto timeout = job.state.on_tick(t0 + 17s);  // 11 s after the re-join
  CHECK_THAT(error_to(timeout, 1).message, Contains("1 more node(s) to reach the minimum of 2"));
}

TEST_CASE("rdzv elastic: an agent arriving during a round re-forms the job, not counted",
          "[rdzv]") {
  Job job(elastic(2, 3, 0));
  join_elastic(job, 1, node("a"));
  join_elastic(job, 2, node("b"));
  job.state.on_tick(t0 + 2500ms);  // round 0 with a and b
  auto out = join_elastic(job, 3, node("c"), t0 + 3s);
  const Reform* reform = message_to<Reform>(out, 1);
  REQUIRE(reform != nullptr);
  CHECK(message_to<Reform>(out, 2) != nullptr);
  CHECK(message_to<StopWorkers>(out, 1) == nullptr);  // not a failure
  CHECK(reform->host == "c");
  CHECK(reform->node_rank == -1);
  CHECK(reform->reason == "the job re-forms as round 1 to add c (3 nodes)");
  CHECK(message_to<Reform>(out, 3) == nullptr);
  // A stopped node's workers may die with errors of their own: that is the stop, not a failure.
  Report stopped{0, Outcome::kStopped, FailureReport{}, 0};
  stopped.failure->time_ms = 1;
  job.send(1, stopped, t0 + 3s);
  out = job.send(2, Report{0, Outcome::kStopped, std::nullopt, 0}, t0 + 3s);
  const Decision* d = message_to<Decision>(out, 2);
  REQUIRE(d != nullptr);
  CHECK(d->action == Action::kRestart);  // even with --max-restarts 0
  CHECK(d->membership_change);
  CHECK(d->restart_count == 0);
  Join rejoin = join_as(node("a"), std::nullopt, 3, 0);
  rejoin.min_nodes = 2;
  job.send(1, rejoin, t0 + 4s);
  rejoin.node = node("b");
  out = job.send(2, rejoin, t0 + 4s);  // with c waiting since t0 + 3 s: all MAX=3 are in
  const Assigned* a = message_to<Assigned>(out, 3);
  REQUIRE(a != nullptr);
  CHECK(a->nnodes == 3);
  CHECK(a->restart_count == 0);
  // A fourth agent finds the job full.
  CHECK(error_to(join_elastic(job, 4, node("d"), t0 + 5s), 4).code == "job_full");
}

TEST_CASE("rdzv elastic: a node leaving on purpose re-forms the others, a static job ends",
          "[rdzv]") {
  Job job(elastic(1, 3));
  join_elastic(job, 1, node("a"));
  join_elastic(job, 2, node("b"));
  job.state.on_tick(t0 + 2500ms);
  Report leaving{0, Outcome::kStopped, std::nullopt, 15};
  leaving.leaving = true;
  auto out = job.send(2, leaving, t0 + 3s);
  const Reform* reform = message_to<Reform>(out, 1);
  REQUIRE(reform != nullptr);
  CHECK(reform->host == "b");
  CHECK(reform->node_rank == 1);
  CHECK_THAT(reform->reason, Contains("left the job") && Contains("signal 15"));
  CHECK(message_to<Reform>(out, 2) == nullptr);  // it is leaving
  out = job.send(1, Report{0, Outcome::kStopped, std::nullopt, 0}, t0 + 3s);
  const Decision* d = message_to<Decision>(out, 1);
  REQUIRE(d != nullptr);
  CHECK(d->action == Action::kRestart);
  CHECK(d->membership_change);
  CHECK(message_to<Decision>(out, 2) == nullptr);

  Job fixed(settings(2, 3));
  fixed.join(1, node("a"));
  fixed.join(2, node("b"));
  fixed.send(2, leaving);
  out = fixed.send(1, Report{0, Outcome::kStopped, std::nullopt, 0});
  CHECK(message_to<Decision>(out, 1)->action == Action::kFinish);
  CHECK(message_to<Decision>(out, 1)->exit_code == 143);
}

}  // namespace test_rdzv_elastic
