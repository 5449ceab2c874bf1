// The rendezvous state machine, driven directly: the restart classification of a root cause (the
// same failure twice, an early ImportError, a device fault).
#include <catch2/catch.hpp>

#include "rendezvous/state/state.hpp"
#include "support/rdzv_job.hpp"

namespace test_rdzv_failure_class {

using namespace npu_run::rdzv;
using namespace npu_run::testing::rdzv_job;
using npu_run::testing::message_to;
using namespace std::chrono_literals;

namespace {

// Node a's worker raised `exception` at `frame`; node b was stopped for it. The decision.
Decision fail_round(Job& job, const std::string& exception, const std::string& frame,
                    bool early = false) {
  Report failure = failed(job.state.round(), 0, 1);
  failure.failure->evidence.exception = exception;
  failure.failure->evidence.frame = frame;
  failure.failure->evidence.last_beat = "step 3";
  failure.failure->evidence.early = early;
  job.send(1, failure);
  const auto out = job.send(2, Report{job.state.round(), Outcome::kStopped, std::nullopt, 0});
  const Decision* d = message_to<Decision>(out, 1);
  REQUIRE(d != nullptr);
  return *d;
}

void rejoin_both(Job& job) {
  const int nodes = job.state.settings().max_nodes;
  const int restarts = job.state.settings().max_restarts;
  job.send(2, join_as(node("b"), std::nullopt, nodes, restarts));
  job.send(1, join_as(node("a"), std::nullopt, nodes, restarts));
}

}  // namespace

TEST_CASE("rdzv state: the same exception at the same place twice stops the job with 123",
          "[rdzv][classify]") {
  Job job(settings(2, 5));
  job.join(1, node("a"));
  job.join(2, node("b"));
  Decision d = fail_round(job, "ValueError", "train.py:88 in step");
  CHECK(d.action == Action::kRestart);
  CHECK(d.failure_class == FailureClass::kOther);
  CHECK(d.restarts_charged == 1);
  rejoin_both(job);
  d = fail_round(job, "ValueError", "train.py:88 in step");
  CHECK(d.action == Action::kFinish);
  CHECK(d.exit_code == npu_run::kExitNoProgress);
  CHECK(d.failure_class == FailureClass::kDeterministic);
  CHECK(d.class_reason ==
        "deterministic: ValueError at train.py:88 in step after beat 'step 3', twice");
  CHECK(d.root_cause->exit_code == 1);  // the failure itself is still named
}

TEST_CASE("rdzv state: another place, or a round in between that re-formed, is not the same",
          "[rdzv][classify]") {
  Job job(settings(2, 5));
  job.join(1, node("a"));
  job.join(2, node("b"));
  fail_round(job, "ValueError", "train.py:88 in step");
  rejoin_both(job);
  Decision d = fail_round(job, "ValueError", "train.py:90 in step");
  CHECK(d.action == Action::kRestart);
  CHECK(d.failure_class == FailureClass::kOther);
  rejoin_both(job);
  d = fail_round(job, "KeyError", "train.py:90 in step");
  CHECK(d.action == Action::kRestart);
  CHECK(d.restarts_charged == 3);
}

TEST_CASE("rdzv state: an ImportError at start stops the job at once with 123",
          "[rdzv][classify]") {
  Job job(settings(2, 5));
  job.join(1, node("a"));
  job.join(2, node("b"));
  const Decision d = fail_round(job, "ModuleNotFoundError", "train.py:3 in <module>", true);
  CHECK(d.action == Action::kFinish);
  CHECK(d.exit_code == npu_run::kExitNoProgress);
  CHECK(d.class_reason == "deterministic: ModuleNotFoundError at train.py:3 in <module> at start");
  CHECK(d.restart_count == 0);
}

TEST_CASE("rdzv state: a device fault of a static job without spares costs a restart as before",
          "[rdzv][classify]") {
  Job job(settings(2, 1));
  job.join(1, node("a"));
  job.join(2, node("b"));
  Report failure = failed(0, 0, 1);
  failure.failure->evidence.fault = "HCCL could not set up a link to a peer in time (EI0006): x";
  job.send(1, failure);
  const auto out = job.send(2, Report{0, Outcome::kStopped, std::nullopt, 0});
  const Decision* d = message_to<Decision>(out, 1);
  REQUIRE(d != nullptr);
  CHECK(d->action == Action::kRestart);
  CHECK(d->failure_class == FailureClass::kInfrastructure);
  CHECK(d->restarts_charged == 1);
}

}  // namespace test_rdzv_failure_class
