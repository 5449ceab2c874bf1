// The rendezvous state machine, driven directly: how a round ends (success, a failure and its
// root cause, restarts, lost nodes, stale reports, the join timeout, another command).
#include <catch2/catch.hpp>

#include "rendezvous/state/state.hpp"
#include "support/rdzv_job.hpp"

namespace test_rdzv_outcomes {

using namespace npu_run::rdzv;
using namespace npu_run::testing::rdzv_job;
using Catch::Matchers::Contains;
using npu_run::kExitRendezvous;
using npu_run::testing::message_to;
using namespace std::chrono_literals;

TEST_CASE("rdzv state: all nodes succeed -> every node is told to finish with 0", "[rdzv]") {
  Job job(settings(2));
  job.join(1, node("a"));
  job.join(2, node("b"));
  CHECK(job.send(1, Report{0, Outcome::kSucceeded, std::nullopt, 0}).empty());
  const auto out = job.send(2, Report{0, Outcome::kSucceeded, std::nullopt, 0});
  const Decision* d = message_to<Decision>(out, 1);
  REQUIRE(d != nullptr);
  CHECK(message_to<Decision>(out, 2) != nullptr);
  CHECK(d->action == Action::kFinish);
  CHECK(d->exit_code == 0);
  CHECK_FALSE(d->root_cause);
  CHECK(job.state.phase() == RendezvousState::Phase::kFinished);
  REQUIRE(job.state.final_decision());
}

TEST_CASE("rdzv state: a failure stops the other nodes, then one finish with the root cause",
          "[rdzv]") {
  Job job(settings(3));
  job.join(1, node("a"));
  job.join(2, node("b"));
  job.join(3, node("c"));
  auto out = job.send(2, failed(0, 3, 7));
  CHECK(job.state.phase() == RendezvousState::Phase::kStopping);
  const StopWorkers* stop = message_to<StopWorkers>(out, 1);
  REQUIRE(stop != nullptr);
  CHECK(message_to<StopWorkers>(out, 3) != nullptr);
  CHECK(message_to<StopWorkers>(out, 2) == nullptr);  // the failing node knows
  CHECK(stop->root_cause.host == "b");
  CHECK(stop->root_cause.node_rank == 1);
  CHECK(stop->root_cause.rank == 3);
  // A later failure elsewhere is a consequence, not the root cause.
  CHECK(job.send(1, failed(0, 0, 9)).empty());
  out = job.send(3, Report{0, Outcome::kStopped, std::nullopt, 0});
  const Decision* d = message_to<Decision>(out, 3);
  REQUIRE(d != nullptr);
  CHECK(d->action == Action::kFinish);
  CHECK(d->exit_code == 7);
  CHECK(d->root_cause->host == "b");
  CHECK(d->root_cause->rank == 3);
}

TEST_CASE("rdzv state: restarts run a new round together until they are used up", "[rdzv]") {
  Job job(settings(2, 2));
  job.join(1, node("a"));
  job.join(2, node("b"));
  for (int attempt = 1; attempt <= 2; ++attempt) {
    job.send(1, failed(job.state.round(), 0, 3));
    const auto out = job.send(2, Report{job.state.round(), Outcome::kStopped, std::nullopt, 0});
    const Decision* d = message_to<Decision>(out, 2);
    REQUIRE(d != nullptr);
    CHECK(d->action == Action::kRestart);
    CHECK(d->restart_count == attempt);
    CHECK(d->root_cause->exit_code == 3);
    CHECK(job.state.phase() == RendezvousState::Phase::kJoining);
    CHECK(job.send(2, join_as(node("b"), std::nullopt, 2, 2)).empty());
    const auto assigned = job.send(1, join_as(node("a"), std::nullopt, 2, 2));
    CHECK(message_to<Assigned>(assigned, 1)->restart_count == attempt);
    CHECK(message_to<Assigned>(assigned, 2)->restart_count == attempt);
    CHECK(message_to<Assigned>(assigned, 2)->round == static_cast<uint64_t>(attempt));
  }
  job.send(1, failed(2, 0, 4));
  const auto out = job.send(2, Report{2, Outcome::kStopped, std::nullopt, 0});
  CHECK(message_to<Decision>(out, 1)->action == Action::kFinish);
  CHECK(message_to<Decision>(out, 1)->exit_code == 4);
  CHECK(message_to<Decision>(out, 1)->restart_count == 2);
}

TEST_CASE("rdzv state: restarts that make no progress in a row stop the job with 123", "[rdzv]") {
  JobSettings s = settings(2, 10);
  s.max_no_progress_restarts = 2;
  Job job(s);
  job.join(1, node("a"));
  job.join(2, node("b"));
  // Round 0 progresses (a first attempt that beat), round 1 does not, round 2 does (the count
  // starts over), rounds 3 and 4 do not: the job ends after round 4.
  const std::vector<bool> progress = {true, false, true, false, false};
  for (size_t round = 0; round < progress.size(); ++round) {
    Report failure = failed(job.state.round(), 0, 3);
    failure.progressed = progress[round];
    job.send(1, failure);
    Report stopped{job.state.round(), Outcome::kStopped, std::nullopt, 0};
    stopped.progressed = false;
    const auto out = job.send(2, stopped);
    const Decision* d = message_to<Decision>(out, 2);
    REQUIRE(d != nullptr);
    if (round + 1 < progress.size()) {
      CHECK(d->action == Action::kRestart);
      job.send(2, join_as(node("b"), std::nullopt, 2, 10));
      job.send(1, join_as(node("a"), std::nullopt, 2, 10));
      continue;
    }
    CHECK(d->action == Action::kFinish);
    CHECK(d->exit_code == npu_run::kExitNoProgress);
    CHECK(d->root_cause->exit_code == 3);  // the failure itself is still named
    CHECK(d->restart_count == 4);
  }
}

TEST_CASE("rdzv state: stale and duplicate reports are ignored", "[rdzv]") {
  Job job(settings(2));
  job.join(1, node("a"));
  job.join(2, node("b"));
  CHECK(job.send(1, Report{5, Outcome::kSucceeded, std::nullopt, 0}).empty());
  job.send(1, Report{0, Outcome::kSucceeded, std::nullopt, 0});
  CHECK(job.send(1, failed(0, 0, 1)).empty());  // already reported success
  CHECK(job.state.phase() == RendezvousState::Phase::kRunning);
}

TEST_CASE("rdzv state: an agent stopped by a signal ends the job without a restart", "[rdzv]") {
  Job job(settings(2, 3));
  job.join(1, node("a"));
  job.join(2, node("b"));
  auto out = job.send(1, Report{0, Outcome::kStopped, std::nullopt, 15});
  CHECK(message_to<StopWorkers>(out, 2) != nullptr);
  out = job.send(2, Report{0, Outcome::kStopped, std::nullopt, 0});
  const Decision* d = message_to<Decision>(out, 2);
  REQUIRE(d != nullptr);
  CHECK(d->action == Action::kFinish);
  CHECK(d->exit_code == 143);
  CHECK_THAT(d->root_cause->description, Contains("stopped by signal 15"));
}

TEST_CASE("rdzv state: a node lost mid-round is a failure of the job", "[rdzv]") {
  Job job(settings(2));
  job.join(1, node("a"));
  job.join(2, node("b"));
  auto out = job.state.on_disconnect(2, t0);
  const StopWorkers* stop = message_to<StopWorkers>(out, 1);
  REQUIRE(stop != nullptr);
  CHECK(stop->root_cause.host == "b");
  CHECK(stop->root_cause.exit_code == kExitRendezvous);
  CHECK_THAT(stop->root_cause.description, Contains("agent lost: connection closed"));
  out = job.send(1, Report{0, Outcome::kStopped, std::nullopt, 0});
  CHECK(message_to<Decision>(out, 1)->exit_code == kExitRendezvous);
  CHECK(message_to<Decision>(out, 2) == nullptr);  // nobody to tell
}

TEST_CASE("rdzv state: a node that reported and then left is not lost", "[rdzv]") {
  Job job(settings(2));
  job.join(1, node("a"));
  job.join(2, node("b"));
  job.send(2, Report{0, Outcome::kSucceeded, std::nullopt, 0});
  CHECK(job.state.on_disconnect(2, t0).empty());
  const auto out = job.send(1, Report{0, Outcome::kSucceeded, std::nullopt, 0});
  CHECK(message_to<Decision>(out, 1)->exit_code == 0);
}

TEST_CASE("rdzv state: missed heartbeats count as a lost node", "[rdzv]") {
  Job job(settings(2));
  job.join(1, node("a"));
  job.join(2, node("b"));
  CHECK(message_to<HeartbeatAck>(job.send(1, Heartbeat{}, t0 + 25s), 1) != nullptr);
  CHECK(job.state.on_tick(t0 + 29s).empty());
  const auto out = job.state.on_tick(t0 + 31s);  // node b silent for 31 s, node a for 6 s
  CHECK(error_to(out, 2).code == "heartbeat_timeout");
  const StopWorkers* stop = message_to<StopWorkers>(out, 1);
  REQUIRE(stop != nullptr);
  CHECK_THAT(stop->root_cause.description, Contains("no heartbeat for 30.0 s"));
}

TEST_CASE("rdzv state: a lost node failed when it was last heard from", "[rdzv]") {
  Job job(settings(2));
  job.join(1, node("a"));
  job.join(2, node("b"));
  job.send(2, Heartbeat{}, t0 + 10s);  // node b's last word
  // Node a's worker fails at 20 s because node b is gone (a gloo "Connection reset by peer").
  FailureReport consequence;
  consequence.rank = 0;
  consequence.exit_code = 1;
  consequence.time_ms = (t0 + 20s).wall_ms;
  consequence.description = "exit code 1";
  job.send(1, Report{0, Outcome::kFailed, consequence, 0}, t0 + 20s);
  // Node b's silence is noticed at 41 s; it is still the earlier failure, and the job's code.
  const auto out = job.state.on_tick(t0 + 41s);
  const Decision* d = message_to<Decision>(out, 1);
  REQUIRE(d != nullptr);
  REQUIRE(d->root_cause);
  CHECK(d->root_cause->host == "b");
  CHECK(d->root_cause->time_ms == (t0 + 10s).wall_ms);
  CHECK(d->exit_code == kExitRendezvous);
  CHECK_THAT(d->root_cause->description, Contains("last heard from 31.0 s before"));
}

TEST_CASE("rdzv state: with the default run id, agents running another command are refused",
          "[rdzv]") {
  JobSettings s = settings(2);
  s.check_command = true;
  SECTION("the hosting agent's command is the job's") {
    s.command = "train.py --lr 1";
    Job job(s);
    job.greet(1);
    Join other = join_as(node("b"), std::nullopt, 2);
    other.command = "other.py";
    const auto refused = error_to(job.send(1, other), 1);
    CHECK(refused.code == "job_mismatch");
    CHECK_THAT(refused.message, Contains("runs 'other.py' but this job runs 'train.py --lr 1'") &&
                                    Contains("its own --master-port") && Contains("--rdzv-id"));
  }
  SECTION("without one (npu_run rdzv-server), the first join's") {
    Job job(s);
    job.greet(1);
    Join first = join_as(node("a"), std::nullopt, 2);
    first.command = "a.py";
    CHECK(job.send(1, first).empty());
    job.greet(2);
    Join second = join_as(node("b"), std::nullopt, 2);
    second.command = "b.py";
    CHECK(error_to(job.send(2, second), 2).code == "job_mismatch");
  }
  SECTION("a run id of its own names the job: commands may differ") {
    s.check_command = false;
    s.command = "a.py";
    Job job(s);
    job.greet(1);
    Join other = join_as(node("b"), std::nullopt, 2);
    other.command = "b.py";
    CHECK(job.send(1, other).empty());
  }
}

TEST_CASE("rdzv state: progress names the missing node ranks at a calm rate", "[rdzv]") {
  Job job(settings(4));
  job.join(1, node("a"), 0);
  job.join(2, node("b"), 2);
  CHECK(job.state.on_tick(t0 + 4s).empty());
  const auto out = job.state.on_tick(t0 + 5s);
  const Progress* p = message_to<Progress>(out, 1);
  REQUIRE(p != nullptr);
  CHECK(message_to<Progress>(out, 2) != nullptr);
  CHECK(p->joined == 2);
  CHECK(p->expected == 4);
  CHECK(p->missing_node_ranks == std::vector<int>{1, 3});
  CHECK(out.size() == 1);  // one broadcast shared by all waiting agents
  CHECK(job.state.on_tick(t0 + 6s).empty());
  // With automatic ranks, nobody can say which ranks are missing.
  job.join(3, node("c"));
  const auto later = job.state.on_tick(t0 + 10s);
  CHECK(message_to<Progress>(later, 3)->missing_node_ranks.empty());
}

TEST_CASE("rdzv state: the join timeout names who is missing and ends the job", "[rdzv]") {
  JobSettings s = settings(3);
  s.heartbeat_timeout = 10'000s;
  s.join_timeout = 60s;
  Job job(s);
  job.join(1, node("a"), 0);
  job.join(2, node("b"), 2);
  CHECK(job.state.on_tick(t0 + 59s).size() <= 1);  // at most a progress report
  const auto out = job.state.on_tick(t0 + 61s);
  const auto e = error_to(out, 1);
  CHECK(e.code == "rendezvous_timeout");
  CHECK_THAT(e.message,
             Contains("only 2 of 3 nodes joined within 60 s") && Contains("node ranks 1"));
  CHECK(message_to<ErrorReply>(out, 2) != nullptr);
  CHECK(job.state.phase() == RendezvousState::Phase::kFinished);
  CHECK(job.state.final_decision()->exit_code == kExitRendezvous);
}

TEST_CASE("rdzv state: reports from outsiders and joins during a round are refused", "[rdzv]") {
  Job job(settings(1));
  job.greet(9);
  CHECK(error_to(job.send(9, Report{0, Outcome::kSucceeded, std::nullopt, 0}), 9).code ==
        "protocol_order");
  job.join(1, node("a"));
  CHECK(error_to(job.send(1, join_as(node("a"), std::nullopt, 1)), 1).code == "protocol_order");
}

TEST_CASE("rdzv state: a single node is a job of one", "[rdzv]") {
  Job job(settings(1, 1));
  const auto out = job.join(1, node("solo", 4));
  CHECK(message_to<Assigned>(out, 1)->world_size == 4);
  const auto restart = job.send(1, failed(0, 2, 5));
  CHECK(message_to<Decision>(restart, 1)->action == Action::kRestart);
  job.send(1, join_as(node("solo", 4), std::nullopt, 1, 1));
  const auto done = job.send(1, Report{1, Outcome::kSucceeded, std::nullopt, 0});
  CHECK(message_to<Decision>(done, 1)->exit_code == 0);
}

TEST_CASE("rdzv state: an earlier error reported later becomes the root cause", "[rdzv]") {
  Job job(settings(3));
  job.join(1, node("a"));
  job.join(2, node("b"));
  job.join(3, node("c"));
  Report first = failed(0, 3, 1);  // a rank blocked in a collective, failing at t = 5 s
  first.failure->time_ms = 5000;
  auto out = job.send(2, first);
  REQUIRE(message_to<StopWorkers>(out, 1) != nullptr);
  // Node a was stopped, but its rank 0 had raised at t = 2 s and hung while exiting.
  FailureReport raised;
  raised.rank = 0;
  raised.exit_code = 143;  // npu_run's stop, not the worker's own status
  raised.description = "raised an error, then was stopped by npu_run while exiting";
  raised.time_ms = 2000;
  raised.stopped_after_error = true;
  CHECK(job.send(1, Report{0, Outcome::kStopped, raised, 0}).empty());
  Report later = failed(0, 5, 9);
  later.failure->time_ms = 7000;
  out = job.send(3, later);
  const Decision* d = message_to<Decision>(out, 3);
  REQUIRE(d != nullptr);
  REQUIRE(d->root_cause);
  CHECK(d->root_cause->host == "a");
  CHECK(d->root_cause->rank == 0);
  CHECK(d->root_cause->time_ms == 2000);
  CHECK(d->exit_code == 1);  // the first failure's code: the raised rank never exited on its own
}

TEST_CASE("rdzv state: an earlier error does not replace a stop by signal", "[rdzv]") {
  Job job(settings(2));
  job.join(1, node("a"));
  job.join(2, node("b"));
  Report stopped{0, Outcome::kStopped, std::nullopt, 15};
  job.send(1, stopped);
  Report earlier = failed(0, 2, 1);
  earlier.failure->time_ms = 1000;
  earlier.outcome = Outcome::kStopped;
  const auto out = job.send(2, earlier);
  const Decision* d = message_to<Decision>(out, 2);
  REQUIRE(d != nullptr);
  CHECK(d->exit_code == 143);
  CHECK(d->root_cause->host == "a");
}

}  // namespace test_rdzv_outcomes
