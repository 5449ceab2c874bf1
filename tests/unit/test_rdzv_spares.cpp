// The rendezvous state machine, driven directly: spares (--spares) standing by and taking a lost
// or faulty node's seat, the affinity, the ledger of bad nodes.
#include <catch2/catch.hpp>

#include "rendezvous/state/state.hpp"
#include "support/rdzv_job.hpp"

namespace test_rdzv_spares {

using namespace npu_run::rdzv;
using namespace npu_run::testing::rdzv_job;
using Catch::Matchers::Contains;
using npu_run::HealthMode;
using npu_run::HealthStatus;
using npu_run::NodeVerdict;
using npu_run::testing::message_to;
using namespace std::chrono_literals;

// ---- spares (--spares) ----

namespace {

// Joins `id` on `host` to a job with spares; the answer.
std::vector<Outgoing> join_spare_job(Job& job, ClientId id, const std::string& host,
                                     const std::string& affinity = "",
                                     std::optional<int> rank = std::nullopt) {
  job.greet(id);
  Join j =
      join_as(node(host), rank, job.state.settings().max_nodes, job.state.settings().max_restarts);
  j.spares = job.state.settings().spares;
  j.affinity = affinity;
  return job.send(id, j);
}

Join rejoin_of(const Job& job, const std::string& host) {
  Join j = join_as(node(host), std::nullopt, job.state.settings().max_nodes,
                   job.state.settings().max_restarts);
  j.spares = job.state.settings().spares;
  return j;
}

// Nodes a (1), b (2) run; c (3) stands by. Loses b; a reports. The decision, to a.
Decision lose_b(Job& job) {
  auto out = job.state.on_disconnect(2, t0 + 1s);
  REQUIRE(message_to<StopWorkers>(out, 1) != nullptr);
  out = job.send(1, Report{job.state.round(), Outcome::kStopped, std::nullopt, 0}, t0 + 1s);
  const Decision* d = message_to<Decision>(out, 1);
  REQUIRE(d != nullptr);
  return *d;
}

}  // namespace

TEST_CASE("rdzv spares: agents beyond the job's nodes stand by, and the job ends without them",
          "[rdzv][spares]") {
  Job job(with_spares(2, 1));
  join_spare_job(job, 1, "a");
  const auto formed = join_spare_job(job, 2, "b");
  REQUIRE(message_to<Assigned>(formed, 2) != nullptr);
  const auto standby = join_spare_job(job, 3, "c");
  const Standby* s = message_to<Standby>(standby, 3);
  REQUIRE(s != nullptr);
  CHECK(s->nodes == 2);
  CHECK(s->spares == 1);
  const JobStatus status = job.state.status(t0);
  REQUIRE(status.nodes.size() == 3);
  CHECK(status.nodes[2].host == "c");
  CHECK(status.nodes[2].state == "spare");
  // One more is one too many.
  const auto full = join_spare_job(job, 4, "d");
  CHECK_THAT(error_to(full, 4).message, Contains("and 1 spares") && Contains("--spares"));
  // The job ends: the spare is dismissed with 0.
  job.send(1, Report{0, Outcome::kSucceeded, std::nullopt, 0});
  const auto out = job.send(2, Report{0, Outcome::kSucceeded, std::nullopt, 0});
  const Dismissed* dismissed = message_to<Dismissed>(out, 3);
  REQUIRE(dismissed != nullptr);
  CHECK(dismissed->exit_code == 0);
  CHECK_THAT(dismissed->reason, Contains("without needing this spare"));
}

TEST_CASE("rdzv spares: a lost node's seat goes to the spare, no other rank moves, no restart paid",
          "[rdzv][spares]") {
  Job job(with_spares(3, 1));
  join_spare_job(job, 1, "a");
  join_spare_job(job, 2, "b");
  join_spare_job(job, 5, "e");  // node 2 by host order
  join_spare_job(job, 3, "c");  // the spare: it came after the round formed
  auto out = job.state.on_disconnect(2, t0 + 1s);
  job.send(1, Report{0, Outcome::kStopped, std::nullopt, 0}, t0 + 1s);
  out = job.send(5, Report{0, Outcome::kStopped, std::nullopt, 0}, t0 + 1s);
  const Decision* d = message_to<Decision>(out, 1);
  REQUIRE(d != nullptr);
  CHECK(d->action == Action::kRestart);
  CHECK(d->restart_count == 1);
  CHECK(d->restarts_charged == 0);
  CHECK(d->failure_class == FailureClass::kInfrastructure);
  const std::vector<TakenOut> taken = job.state.take_taken_out();
  REQUIRE(taken.size() == 1);
  CHECK(taken[0].host == "b");
  CHECK(taken[0].reason == "lost");
  CHECK(taken[0].node_rank == 1);
  // Node e re-joins first: its seat (2) is kept whatever the order.
  CHECK(job.send(5, rejoin_of(job, "e"), t0 + 2s).empty());
  out = job.send(1, rejoin_of(job, "a"), t0 + 2s);
  const Assigned* spare = message_to<Assigned>(out, 3);
  REQUIRE(spare != nullptr);
  CHECK(spare->node_rank == 1);
  CHECK(spare->rank_offset == 2);
  CHECK(spare->restart_count == 1);
  CHECK(message_to<Assigned>(out, 1)->node_rank == 0);
  CHECK(message_to<Assigned>(out, 5)->node_rank == 2);
  CHECK(message_to<Assigned>(out, 5)->rank_offset == 4);
  // A host of a node taken out does not come back in this job.
  const auto back = join_spare_job(job, 6, "b");
  CHECK(error_to(back, 6).code == "ledgered");
}

TEST_CASE("rdzv spares: a node whose agent was signalled leaves its seat to a ready spare",
          "[rdzv][spares]") {
  for (const bool spare_ready : {true, false}) {
    Job job(with_spares(2, 1));
    join_spare_job(job, 1, "a");
    join_spare_job(job, 2, "b");
    if (spare_ready) join_spare_job(job, 3, "c");
    // b's agent got SIGTERM (its ssh session was lost) and leaves.
    Report leaving{0, Outcome::kStopped, std::nullopt, 15};
    leaving.leaving = true;
    auto out = job.send(2, leaving, t0 + 1s);
    REQUIRE(message_to<StopWorkers>(out, 1) != nullptr);
    out = job.send(1, Report{0, Outcome::kStopped, std::nullopt, 0}, t0 + 1s);
    const Decision* d = message_to<Decision>(out, 1);
    REQUIRE(d != nullptr);
    if (!spare_ready) {  // a deliberate stop, as ever: the job ends with the signal's code
      CHECK(d->action == Action::kFinish);
      CHECK(d->exit_code == 143);
      continue;
    }
    CHECK(d->action == Action::kRestart);
    CHECK(d->restarts_charged == 0);
    CHECK(d->failure_class == FailureClass::kInfrastructure);
    CHECK(job.state.take_taken_out().empty());  // it left: not ledgered
    out = job.send(1, rejoin_of(job, "a"), t0 + 2s);
    const Assigned* spare = message_to<Assigned>(out, 3);
    REQUIRE(spare != nullptr);
    CHECK(spare->node_rank == 1);
    CHECK(message_to<Assigned>(out, 1)->node_rank == 0);
  }
}

TEST_CASE("rdzv spares: with no spare left a static job's lost node costs a restart, then 125",
          "[rdzv][spares]") {
  Job job(with_spares(2, 1));
  join_spare_job(job, 1, "a");
  join_spare_job(job, 2, "b");
  const Decision d = lose_b(job);  // nobody stands by yet
  CHECK(d.action == Action::kFinish);
  CHECK(d.exit_code == npu_run::kExitRendezvous);
  CHECK_THAT(d.class_reason, Contains("was lost; no spare is left to take its place"));
  CHECK(job.state.take_taken_out().empty());  // not taken out: the job ended with it
}

TEST_CASE("rdzv spares: a device fault takes its node out for the spare", "[rdzv][spares]") {
  Job job(with_spares(2, 1, 0));
  join_spare_job(job, 1, "a");
  join_spare_job(job, 2, "b");
  join_spare_job(job, 3, "c");
  Report fault = failed(0, 3, 1);
  fault.failure->evidence.fault = "HCCS link error between devices: HCCS LINK ERROR";
  job.send(2, fault);
  const auto out = job.send(1, Report{0, Outcome::kStopped, std::nullopt, 0});
  const Dismissed* dismissed = message_to<Dismissed>(out, 2);
  REQUIRE(dismissed != nullptr);
  CHECK(dismissed->exit_code == 0);
  CHECK_THAT(dismissed->reason, Contains("node 1 (b) is taken out of the job: HCCS link error") &&
                                    Contains("a spare takes its seat"));
  CHECK(message_to<Decision>(out, 2) == nullptr);
  CHECK(message_to<Decision>(out, 1)->restarts_charged == 0);
  const auto assigned = job.send(1, rejoin_of(job, "a"));
  REQUIRE(message_to<Assigned>(assigned, 3) != nullptr);
  CHECK(message_to<Assigned>(assigned, 3)->node_rank == 1);
}

TEST_CASE("rdzv spares: a spare with the lost node's affinity takes its seat", "[rdzv][spares]") {
  Job job(with_spares(2, 2));
  join_spare_job(job, 1, "a", "rack1");
  join_spare_job(job, 2, "b", "rack2");
  join_spare_job(job, 3, "c", "rack1");
  join_spare_job(job, 4, "d", "rack2");
  lose_b(job);
  const auto out = job.send(1, rejoin_of(job, "a"), t0 + 2s);
  REQUIRE(message_to<Assigned>(out, 4) != nullptr);
  CHECK(message_to<Assigned>(out, 4)->node_rank == 1);
  CHECK(message_to<Assigned>(out, 3) == nullptr);  // c still stands by
}

TEST_CASE("rdzv spares: named spares (--node-rank past --nnodes) stand by first",
          "[rdzv][spares]") {
  Job job(with_spares(2, 1));
  join_spare_job(job, 1, "a", "", 2);  // the spare's rank, though it came first
  join_spare_job(job, 2, "b");
  const auto out = join_spare_job(job, 3, "c");
  CHECK(message_to<Standby>(out, 1) != nullptr);
  CHECK(message_to<Assigned>(out, 2)->node_rank == 0);
  CHECK(message_to<Assigned>(out, 3)->node_rank == 1);
  Job other(with_spares(2, 1));
  const auto beyond = join_spare_job(other, 1, "a", "", 3);
  CHECK_THAT(error_to(beyond, 1).message, Contains("--nnodes 2 and --spares 1: node ranks run "
                                                   "from 0 to 2"));
  Job mismatch(with_spares(2, 1));
  mismatch.greet(1);
  CHECK(error_to(mismatch.send(1, join_as(node("a"), std::nullopt, 2)), 1).code ==
        "spares_mismatch");
}

TEST_CASE("rdzv spares: a node failing its health gate at a restart is taken out for the spare",
          "[rdzv][spares]") {
  Job job(with_spares(2, 1, 1));
  for (const auto& [id, host] : {std::pair{1, "a"}, std::pair{2, "b"}, std::pair{3, "c"}}) {
    job.greet(static_cast<ClientId>(id));
    Join j = rejoin_of(job, host);
    j.health = HealthMode::kGate;
    job.send(static_cast<ClientId>(id), j);
    job.send(static_cast<ClientId>(id), HealthReport{NodeVerdict{}});
  }
  job.send(1, failed(0, 0, 1));
  job.send(2, Report{0, Outcome::kStopped, std::nullopt, 0});
  Join a = rejoin_of(job, "a");
  a.health = HealthMode::kGate;
  job.send(1, a);
  job.send(1, HealthReport{NodeVerdict{}});
  Join b = rejoin_of(job, "b");
  b.health = HealthMode::kGate;
  job.send(2, b);
  NodeVerdict bad;
  bad.findings.push_back({"npu-smi health", 3, HealthStatus::kFail, "Alarm", {}});
  const auto out = job.send(2, HealthReport{bad});
  const Dismissed* dismissed = message_to<Dismissed>(out, 2);
  REQUIRE(dismissed != nullptr);
  CHECK_THAT(dismissed->reason, Contains("failed its health gate"));
  REQUIRE(message_to<Assigned>(out, 3) != nullptr);
  CHECK(message_to<Assigned>(out, 3)->node_rank == 1);
  CHECK(message_to<Assigned>(out, 1)->node_rank == 0);
  const auto taken = job.state.take_taken_out();
  REQUIRE(taken.size() == 1);
  CHECK(taken[0].reason == "failed its health gate");
}

TEST_CASE("rdzv spares: a host in the ledger of bad nodes is refused, naming the entry",
          "[rdzv][spares]") {
  JobSettings s = with_spares(2, 1);
  s.ledger["d"] = "lost at 2026-11-26 04:10:00 UTC in job 'x'";
  Job job(s);
  const auto out = join_spare_job(job, 1, "d");
  const ErrorReply e = error_to(out, 1);
  CHECK(e.code == "ledgered");
  CHECK_THAT(e.message, Contains("d is in the ledger of bad nodes (lost at 2026-11-26") &&
                            Contains("npu_run ledger clear d"));
}

TEST_CASE("rdzv spares: two nodes lost in one round with one spare: a static job cannot go on",
          "[rdzv][spares]") {
  Job job(with_spares(3, 1));
  join_spare_job(job, 1, "a");
  join_spare_job(job, 2, "b");
  join_spare_job(job, 5, "e");
  join_spare_job(job, 3, "c");
  job.state.on_disconnect(2, t0 + 1s);
  job.state.on_disconnect(5, t0 + 1s);
  const auto out = job.send(1, Report{0, Outcome::kStopped, std::nullopt, 0}, t0 + 1s);
  const Decision* d = message_to<Decision>(out, 1);
  REQUIRE(d != nullptr);
  CHECK(d->action == Action::kFinish);
  CHECK(d->exit_code == npu_run::kExitRendezvous);
  CHECK_THAT(d->class_reason, Contains("no spare is left to take its place"));
}

}  // namespace test_rdzv_spares
