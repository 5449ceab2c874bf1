#include <sys/wait.h>

#include <catch2/catch.hpp>
#include <csignal>

#include "npu_run/worker_exit.hpp"

using namespace npu_run;

TEST_CASE("exit statuses decode wait statuses and map to npu_run's exit code", "[exit]") {
  const ExitStatus three = ExitStatus::from_wait_status(3 << 8);
  CHECK(three.kind == ExitStatus::Kind::kExited);
  CHECK(three.as_exit_code() == 3);
  CHECK(three.describe() == "exit code 3");
  const ExitStatus killed = ExitStatus::from_wait_status(SIGKILL);
  CHECK(killed.kind == ExitStatus::Kind::kSignaled);
  CHECK(killed.as_exit_code() == 137);
  CHECK(killed.describe() == "signal SIGKILL (9)");
  // An exit code equal to a signal number must not be confused with the signal.
  CHECK(ExitStatus::from_wait_status(9 << 8).as_exit_code() == 9);
  CHECK(ExitStatus::exited(0).success());
  CHECK_FALSE(ExitStatus::signaled(SIGTERM).success());
  CHECK(ExitStatus::not_started(ENOENT).as_exit_code() == 127);
  CHECK(ExitStatus::not_started(EACCES).as_exit_code() == 126);
  CHECK(ExitStatus::not_started(EAGAIN).as_exit_code() == 1);
  CHECK(ExitStatus::not_started(ENOENT).describe() == "not started: No such file or directory");
  CHECK(signal_name(SIGTERM) == "SIGTERM");
  CHECK(signal_name(SIGUSR1) == "SIGUSR1");
}

TEST_CASE("group results give the contract's exit status", "[exit]") {
  GroupResult r;
  r.workers.resize(3);
  CHECK(exit_code_for(r) == 0);
  r.outcome = GroupResult::Outcome::kFailed;
  r.workers[1].status = ExitStatus::exited(3);
  r.workers[2].status = ExitStatus::signaled(SIGTERM);
  r.root_cause = 1;
  CHECK(exit_code_for(r) == 3);
  r.root_cause = 2;
  CHECK(exit_code_for(r) == 143);
  r.outcome = GroupResult::Outcome::kStopped;
  r.stop_signal = SIGINT;
  CHECK(exit_code_for(r) == 130);
}
