#include <sys/wait.h>

#include <catch2/catch.hpp>
#include <csignal>

#include "workers/group_result.hpp"

namespace test_worker_exit {

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
  CHECK(ExitStatus::not_started(ENOEXEC).as_exit_code() == 126);
  CHECK(ExitStatus::not_started(ETXTBSY).as_exit_code() == 126);
  CHECK(ExitStatus::not_started(EAGAIN).as_exit_code() == 126);  // fork failed
  CHECK(ExitStatus::not_started(EMFILE).as_exit_code() == 126);  // no descriptor for its pipes
  CHECK(ExitStatus::not_started(E2BIG).as_exit_code() == 126);   // arguments and environment
  CHECK(ExitStatus::not_started(ENOENT).describe() == "not started: No such file or directory");
  CHECK(signal_name(SIGTERM) == "SIGTERM");
  CHECK(signal_name(SIGUSR1) == "SIGUSR1");
  // A broken pipe or a crash is the process's own end, never one npu_run's stop caused.
  CHECK(ExitStatus::signaled(SIGPIPE).self_inflicted());
  CHECK(ExitStatus::signaled(SIGSEGV).self_inflicted());
  for (const int sent : {SIGTERM, SIGKILL, SIGINT, SIGABRT})
    CHECK_FALSE(ExitStatus::signaled(sent).self_inflicted());
  CHECK_FALSE(ExitStatus::exited(141).self_inflicted());
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

namespace {
std::chrono::system_clock::time_point at_ms(int64_t ms) {
  return std::chrono::system_clock::time_point(std::chrono::milliseconds(ms));
}
}  // namespace

TEST_CASE("the root cause is the earliest error, not the first exit", "[exit]") {
  std::vector<WorkerOutcome> w(4);
  // Rank 1 exits first (t = 5 s), failing in a collective that rank 2 left at t = 2 s when it
  // raised; rank 2 was still exiting when npu_run stopped it.
  w[1].status = ExitStatus::exited(1);
  w[1].finished_at = at_ms(5000);
  w[1].raised_at = at_ms(4990);
  w[2].status = ExitStatus::signaled(SIGTERM);
  w[2].stopped_by_agent = true;
  w[2].finished_at = at_ms(5100);
  w[2].raised_at = at_ms(2000);
  // Rank 3 raised too, but only because of the stop.
  w[3].status = ExitStatus::exited(1);
  w[3].stopped_by_agent = true;
  w[3].finished_at = at_ms(5200);
  w[3].raised_at = at_ms(5150);
  CHECK(failed_at(w[2]) == at_ms(2000));
  CHECK(failed_at(w[1]) == at_ms(4990));
  CHECK(choose_root_cause(w, 1) == std::optional<size_t>(2));

  GroupResult r;
  r.outcome = GroupResult::Outcome::kFailed;
  r.workers = w;
  r.first_exit = 1;
  r.root_cause = 2;
  CHECK(exit_code_for(r) == 1);  // rank 1's code: SIGTERM from npu_run is not rank 2's own

  // Without error files the first exit stays the root cause; an exit 0 with a file is no error.
  std::vector<WorkerOutcome> plain(3);
  plain[0].status = ExitStatus::exited(0);
  plain[0].raised_at = at_ms(1);
  plain[2].status = ExitStatus::exited(4);
  plain[2].finished_at = at_ms(3000);
  plain[1].status = ExitStatus::signaled(SIGTERM);
  plain[1].stopped_by_agent = true;
  plain[1].finished_at = at_ms(3100);
  CHECK(choose_root_cause(plain, 2) == std::optional<size_t>(2));
  CHECK_FALSE(choose_root_cause(plain, std::nullopt).has_value());
}

}  // namespace test_worker_exit
