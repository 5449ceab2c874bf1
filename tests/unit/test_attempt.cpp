// What an attempt's end means for the job (report_for), as a pure function of what happened in
// it, and the agent's table of moves between states.
#include <catch2/catch.hpp>
#include <csignal>

#include "agent/core/attempt.hpp"
#include "agent/local_agent.hpp"
#include "basics/exit_status.hpp"

namespace test_attempt {

using namespace npu_run;

namespace {

Assignment node(int node_rank) {
  Assignment a;
  a.round = 4;
  a.node_rank = node_rank;
  a.nnodes = 2;
  a.host = "h" + std::to_string(node_rank);
  return a;
}

GroupEnd ended(std::vector<int> exit_codes) {
  GroupEnd end;
  for (size_t i = 0; i < exit_codes.size(); ++i) {
    WorkerOutcome w;
    w.local_rank = static_cast<int>(i);
    w.global_rank = 10 + static_cast<int>(i);
    w.pid = 100 + static_cast<int>(i);
    w.status = ExitStatus::exited(exit_codes[i]);
    if (exit_codes[i] != 0 && !end.result.root_cause) end.result.root_cause = i;
    end.result.workers.push_back(w);
  }
  end.result.outcome =
      end.result.root_cause ? GroupResult::Outcome::kFailed : GroupResult::Outcome::kSucceeded;
  return end;
}

rdzv::FailureReport elsewhere() {
  rdzv::FailureReport f;
  f.host = "h1";
  f.node_rank = 1;
  f.exit_code = 9;
  return f;
}

}  // namespace

TEST_CASE("attempt: workers that exit 0 are reported as such, with their progress",
          "[unit][agent]") {
  const Attempt attempt(node(0));
  GroupEnd end = ended({0, 0});
  end.progressed = false;
  const AttemptEnd next = report_for(end, attempt, false);
  REQUIRE(next.report);
  CHECK(next.report->round == 4);
  CHECK(next.report->outcome == rdzv::Outcome::kSucceeded);
  CHECK_FALSE(next.report->failure);
  CHECK_FALSE(next.report->progressed);
  CHECK_FALSE(next.leave_with);
  CHECK_FALSE(next.summary);
}

TEST_CASE("attempt: a worker's failure is this node's root cause, with its error file's message",
          "[unit][agent]") {
  const Attempt attempt(node(1));
  GroupEnd end = ended({0, 3});
  end.root_cause_error = "ValueError: bad";
  const AttemptEnd next = report_for(end, attempt, false);
  REQUIRE(next.report);
  CHECK(next.report->outcome == rdzv::Outcome::kFailed);
  REQUIRE(next.report->failure);
  CHECK(next.report->failure->exit_code == 3);
  CHECK(next.report->failure->rank == 11);
  CHECK(next.report->failure->node_rank == 1);
  CHECK(next.report->failure->host == "h1");
  CHECK(next.report->failure->error_message == "ValueError: bad");
  CHECK_FALSE(next.report->fatal);
}

TEST_CASE("attempt: stopped for another node's failure, a local error may still be the older one",
          "[unit][agent]") {
  Attempt attempt(node(0));
  attempt.job_stop = elsewhere();
  const AttemptEnd stopped = report_for(ended({0, 0}), attempt, false);
  CHECK(stopped.report->outcome == rdzv::Outcome::kStopped);
  CHECK_FALSE(stopped.report->failure);
  // A worker that raised before it was stopped: reported, for the rendezvous to compare times.
  const AttemptEnd raised = report_for(ended({5, 0}), attempt, false);
  CHECK(raised.report->outcome == rdzv::Outcome::kStopped);
  REQUIRE(raised.report->failure);
  CHECK(raised.report->failure->exit_code == 5);
}

TEST_CASE("attempt: a re-form is no failure, whatever the workers' deaths say", "[unit][agent]") {
  Attempt attempt(node(0));
  attempt.job_stop = rdzv::Reform{4, "h2", -1, "a node joined"};
  const AttemptEnd next = report_for(ended({143, 143}), attempt, false);
  CHECK(next.report->outcome == rdzv::Outcome::kStopped);
  CHECK_FALSE(next.report->failure);
}

TEST_CASE("attempt: this node's hang is its failure, with the dump's stacks", "[unit][agent]") {
  Attempt attempt(node(0));
  Hang hang;
  hang.local_rank = 1;
  attempt.job_stop = hang;
  GroupEnd end = ended({134, 134});
  end.hang = rdzv::FailureReport{};
  end.hang->exit_code = kExitHang;
  end.hang->hang = true;
  end.stacks = {rdzv::RankStack{}};
  const AttemptEnd next = report_for(end, attempt, false);
  CHECK(next.report->outcome == rdzv::Outcome::kFailed);
  REQUIRE(next.report->failure);
  CHECK(next.report->failure->hang);
  CHECK(next.report->failure->exit_code == kExitHang);
  CHECK(next.report->stacks.size() == 1);
}

TEST_CASE("attempt: a stop signal ends the job for this node at once, and it leaves",
          "[unit][agent]") {
  Attempt attempt(node(1));
  attempt.job_stop = elsewhere();  // a signal overrides the first reason
  attempt.interrupted_by = SIGTERM;
  const AttemptEnd next = report_for(ended({0, 3}), attempt, false);
  REQUIRE(next.report);
  CHECK(next.report->outcome == rdzv::Outcome::kStopped);
  CHECK(next.report->stop_signal == SIGTERM);
  CHECK(next.report->leaving);
  REQUIRE(next.report->failure);
  CHECK(next.report->failure->exit_code == exit_for_signal(SIGTERM));
  CHECK(next.report->failure->description == "npu_run was stopped by SIGTERM");
  CHECK(next.leave_with == exit_for_signal(SIGTERM));
  REQUIRE(next.summary);
  CHECK(next.summary->outcome == GroupResult::Outcome::kStopped);
  CHECK(next.summary->stop_signal == SIGTERM);
  // The agent hosting the rendezvous cannot leave without ending the job.
  CHECK_FALSE(report_for(ended({0, 0}), attempt, true).report->leaving);
}

TEST_CASE("attempt: with the rendezvous lost there is no one to report to", "[unit][agent]") {
  Attempt attempt(node(0));
  attempt.rendezvous_lost = "the server went silent";
  const AttemptEnd next = report_for(ended({143, 143}), attempt, false);
  CHECK_FALSE(next.report);
  CHECK(next.leave_with == kExitRendezvous);
  REQUIRE(next.summary);
  CHECK(next.stopped_because == "the lost rendezvous");
}

TEST_CASE("agent states: only the moves the table lists", "[unit][agent]") {
  using State = LocalAgent::State;
  CHECK(LocalAgent::allowed(State::kInit, State::kRendezvous));
  CHECK(LocalAgent::allowed(State::kRendezvous, State::kRunning));
  CHECK(LocalAgent::allowed(State::kRendezvous, State::kReporting));  // refused here
  CHECK(LocalAgent::allowed(State::kRunning, State::kReporting));
  CHECK(LocalAgent::allowed(State::kReporting, State::kRendezvous));
  CHECK(LocalAgent::allowed(State::kRunning, State::kRendezvous));  // its report was lost
  for (State from : {State::kInit, State::kRendezvous, State::kRunning, State::kReporting})
    CHECK(LocalAgent::allowed(from, State::kDone));
  CHECK_FALSE(LocalAgent::allowed(State::kDone, State::kDone));
  CHECK_FALSE(LocalAgent::allowed(State::kDone, State::kRendezvous));
  CHECK_FALSE(LocalAgent::allowed(State::kInit, State::kRunning));
  CHECK_FALSE(LocalAgent::allowed(State::kReporting, State::kRunning));
  CHECK_FALSE(LocalAgent::allowed(State::kRunning, State::kInit));
}

}  // namespace test_attempt
