// Supervision with real processes: failures stop the group, signals reach the workers, the
// grace period ends in SIGKILL, restarts re-run the group, and nothing is ever left behind.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <csignal>
#include <filesystem>
#include <set>
#include <sstream>

#include "support/harness.hpp"
#include "support/temp_dir.hpp"

namespace test_supervision {

using namespace npu_run::testing;
using Catch::Matchers::Contains;

namespace {

std::vector<std::string> sh_workers(int nproc, const std::string& script,
                                    std::vector<std::string> extra = {}) {
  std::vector<std::string> args = {"--nproc-per-node", std::to_string(nproc)};
  args.insert(args.end(), extra.begin(), extra.end());
  for (const char* a : {"--no-python", "/bin/sh", "-c"}) args.emplace_back(a);
  args.push_back(script);
  return args;
}

}  // namespace

TEST_CASE("supervision: all workers exit 0 -> npu_run exits 0", "[integration][supervision]") {
  const Finished f = run_npu_run(sh_workers(4, "exit 0"));
  INFO(f.err);
  CHECK(f.exit_code == 0);
  CHECK_THAT(f.err, Contains("all 4 workers exited 0"));
}

TEST_CASE("supervision: a worker exiting 3 stops the others and npu_run exits 3 with the summary",
          "[integration][supervision]") {
  TempDir dir;
  const std::string gate = make_gate(dir.file("gate"));
  // Ranks 0, 1, 3 run until stopped; rank 2 fails once the test has seen all of them running.
  NpuRunProcess p(
      sh_workers(4, "if [ $LOCAL_RANK = 2 ]; then read x < " + gate +
                        "; echo 'rank 2 gives up' >&2; exit 3; fi; echo ready; exec sleep 60"));
  p.wait_for_output("ready", 3, 10s);
  open_gate(gate);
  const Finished f = p.wait(15s);
  INFO(f.err);
  CHECK(f.exit_code == 3);
  CHECK(f.seconds < 10);  // SIGTERM ended the sleepers; the 30 s grace was not needed
  CHECK_THAT(f.err, Contains("local rank 2 (rank 2, pid") && Contains("failed with exit code 3"));
  const auto table = f.err.find("root cause first");
  REQUIRE(table != std::string::npos);
  const auto root_row = f.err.find("exit code 3", table);
  const auto stopped_row = f.err.find("signal SIGTERM (15), stopped by npu_run", table);
  REQUIRE(root_row != std::string::npos);
  REQUIRE(stopped_row != std::string::npos);
  CHECK(root_row < stopped_row);
  CHECK(count_occurrences(f.err, "stopped by npu_run") == 3);
  require_no_strays(p);
}

TEST_CASE("supervision: a worker killed by a signal gives 128+signal",
          "[integration][supervision]") {
  const Finished f =
      run_npu_run(sh_workers(2, "if [ $LOCAL_RANK = 1 ]; then kill -SEGV $$; fi; exec sleep 60"));
  INFO(f.err);
  CHECK(f.exit_code == 128 + SIGSEGV);
  CHECK_THAT(f.err, Contains("signal SIGSEGV (11)"));
}

// Output into `head -2`: every rank dies of its own SIGPIPE, the later ones while npu_run is
// stopping them. None was stopped by npu_run (issue 64); the 30 s grace is not waited out.
TEST_CASE("supervision: a rank killed by its own SIGPIPE while being stopped is not called stopped",
          "[integration][supervision]") {
  TempDir dir;
  const std::string gate = make_gate(dir.file("gate"));
  NpuRunProcess p(sh_workers(2, "if [ $LOCAL_RANK = 0 ]; then read x < " + gate +
                                    "; kill -PIPE $$; fi; trap '' TERM; echo ready; sleep 2; "
                                    "kill -PIPE $$"));
  p.wait_for_output("ready", 1, 10s);
  open_gate(gate);
  const Finished f = p.wait(15s);
  INFO(f.err);
  CHECK(f.exit_code == 128 + SIGPIPE);
  CHECK(f.seconds < 10);
  CHECK(count_occurrences(f.err, "signal SIGPIPE (13)\n") == 2);  // both rows, nothing after
  CHECK(count_occurrences(f.err, "stopped by npu_run") == 0);
  require_no_strays(p);
}

TEST_CASE("supervision: workers ignoring SIGTERM get SIGKILL after --term-timeout",
          "[integration][supervision]") {
  TempDir dir;
  const std::string gate = make_gate(dir.file("gate"));
  // `trap '' TERM` is inherited by the sleep it execs into, so only SIGKILL can end those.
  NpuRunProcess p(sh_workers(3,
                             "if [ $LOCAL_RANK = 0 ]; then read x < " + gate +
                                 "; exit 1; fi; trap '' TERM; echo ready; exec sleep 60",
                             {"--term-timeout", "1"}));
  p.wait_for_output("ready", 2, 10s);
  open_gate(gate);
  const Finished f = p.wait(15s);
  INFO(f.err);
  CHECK(f.exit_code == 1);
  CHECK(f.seconds >= 1.0);
  CHECK(f.seconds < 8.0);
  CHECK_THAT(f.err, Contains("sent SIGKILL to 2 workers still running"));
  CHECK(count_occurrences(f.err, "signal SIGKILL (9), stopped by npu_run") == 2);
  require_no_strays(p);
}

TEST_CASE("supervision: stop signals to npu_run reach every worker and give 128+signal",
          "[integration][supervision]") {
  for (int sig : {SIGTERM, SIGINT, SIGHUP, SIGQUIT}) {
    const std::string name = sig == SIGTERM  ? "TERM"
                             : sig == SIGINT ? "INT"
                             : sig == SIGHUP ? "HUP"
                                             : "QUIT";
    // `sleep & wait` keeps the shell responsive to the trap while it waits.
    NpuRunProcess p(sh_workers(3, "trap 'echo got-" + name + "-$LOCAL_RANK; exit 0' " + name +
                                      "; echo ready; sleep 60 & wait"));
    p.wait_for_output("ready", 3, 10s);
    p.send_signal(sig);
    const Finished f = p.wait(15s);
    INFO(name << ": " << f.err);
    CHECK(f.exit_code == 128 + sig);
    for (int r = 0; r < 3; ++r)
      CHECK(count_occurrences(f.out, "got-" + name + "-" + std::to_string(r)) == 1);
    CHECK_THAT(f.err, Contains("npu_run stopped by SIG" + name));
    require_no_strays(p);
  }
}

TEST_CASE("supervision: a second stop signal skips the grace period",
          "[integration][supervision]") {
  NpuRunProcess p(
      sh_workers(2, "trap '' TERM; echo ready; exec sleep 60", {"--term-timeout", "60"}));
  p.wait_for_output("ready", 2, 10s);
  p.send_signal(SIGTERM);
  p.wait_for_output("stopping the workers", 1, 5s, true);
  p.send_signal(SIGTERM);
  const Finished f = p.wait(15s);
  INFO(f.err);
  CHECK(f.exit_code == 143);
  CHECK(f.seconds < 10);
  CHECK_THAT(f.err, Contains("received SIGTERM again: sending SIGKILL"));
  require_no_strays(p);
}

TEST_CASE("supervision: a stop signal during a failure's grace period does not skip the grace",
          "[integration][supervision]") {
  TempDir dir;
  const std::string gate = make_gate(dir.file("gate"));
  NpuRunProcess p(sh_workers(3,
                             "if [ $LOCAL_RANK = 0 ]; then read x < " + gate +
                                 "; exit 1; fi; trap '' TERM; echo ready; exec sleep 60",
                             {"--term-timeout", "2"}));
  p.wait_for_output("ready", 2, 10s);
  open_gate(gate);
  p.wait_for_output("stopping the other 2 workers", 1, 10s, true);
  p.send_signal(SIGTERM);  // e.g. the scheduler, while the group is already in its grace period
  const Finished f = p.wait(15s);
  INFO(f.err);
  CHECK(f.exit_code == 143);
  CHECK(f.seconds >= 2.0);  // the grace ran its course before SIGKILL
  CHECK(f.err.find("received SIGTERM again") == std::string::npos);
  CHECK_THAT(f.err, Contains("sent SIGKILL to 2 workers still running"));
  require_no_strays(p);
}

TEST_CASE("supervision: SIGUSR1 and SIGUSR2 are forwarded and the job goes on",
          "[integration][supervision]") {
  for (const std::string name : {"USR1", "USR2"}) {
    NpuRunProcess p(sh_workers(2, "trap 'echo got-" + name + "-$LOCAL_RANK; exit 0' " + name +
                                      "; echo ready; sleep 60 & wait"));
    p.wait_for_output("ready", 2, 10s);
    p.send_signal(name == "USR1" ? SIGUSR1 : SIGUSR2);
    const Finished f = p.wait(15s);
    INFO(f.err);
    CHECK(f.exit_code == 0);  // the workers chose to finish cleanly
    CHECK(count_occurrences(f.out, "got-" + name + "-") == 2);
    CHECK_THAT(f.err, Contains("received SIG" + name + ": forwarded to 2 worker process groups"));
    require_no_strays(p);
  }
}

TEST_CASE("supervision: a worker that cannot be started is the root cause, later ones never start",
          "[integration][supervision]") {
  // Each run's log directory has a fresh name, so nothing can be put in a rank's way; a path
  // length can: the base is chosen so that local rank 9's directory,
  // <base>/none_XXXXXX/attempt_0/9, is the longest path Linux takes (4,095 bytes) and rank 10's
  // is one byte too long (ENAMETOOLONG).
  TempDir dir;
  std::string base = dir.path();
  const size_t wanted = 4095 - std::string("/none_XXXXXX/attempt_0/9").size();
  while (base.size() < wanted) {
    const size_t left = wanted - base.size();
    // Components of at most 200 bytes (NAME_MAX is 255), never a last one shorter than 2.
    const size_t part = left > 202 ? 200 : (left > 200 ? left - 3 : left - 1);
    base += "/" + std::string(part, 'd');
  }
  REQUIRE(base.size() == wanted);
  std::filesystem::create_directories(base);
  const Finished f =
      run_npu_run(sh_workers(12, "echo started-$LOCAL_RANK; exec sleep 60", {"--log-dir", base}));
  INFO(f.err);
  CHECK(f.exit_code == 126);  // could not be run, as a shell says
  CHECK_THAT(f.err, Contains("cannot start local rank 10: cannot create " + base + "/none_"));
  CHECK_THAT(f.err, Contains("File name too long"));
  CHECK_THAT(f.err, Contains("not started because local rank 10 could not start"));
  CHECK(count_occurrences(f.out, "started-11") == 0);
}

TEST_CASE("supervision: a worker whose exec fails is the root cause with the errno and 126",
          "[integration][supervision]") {
  // Executable, but neither ELF nor "#!": the checks before the launch pass, execve fails with
  // ENOEXEC in the forked child, and the agent learns it through the exec-status pipe.
  TempDir dir;
  const std::string program = dir.write("not-a-program",
                                        "\x7f"
                                        "garbage without a shebang\n",
                                        true);
  NpuRunProcess p({"--nproc-per-node", "2", "--no-python", program});
  const Finished f = p.wait(15s);
  INFO(f.err);
  CHECK(f.exit_code == 126);
  // Workers are spawned without waiting for each exec, so which of the two fails first is the
  // scheduler's choice; the other may be stopped before it reaches exec.
  const std::string cannot = ": cannot execute " + program + ": Exec format error";
  CHECK_THAT(f.err, Contains("cannot start local rank 0" + cannot) ||
                        Contains("cannot start local rank 1" + cannot));
  CHECK_THAT(f.err, Contains("not started: Exec format error"));
  require_no_strays(p);
}

TEST_CASE("supervision: SIGKILL to npu_run leaves no worker, not even their children",
          "[integration][supervision]") {
  // Each worker starts two background children in its process group: PR_SET_PDEATHSIG only
  // reaches the worker itself, the guardian has to take care of the rest.
  NpuRunProcess p(sh_workers(3, "sleep 60 & sleep 60 & echo ready; wait"));
  p.wait_for_output("ready", 3, 10s);
  // agent, guardian, 3 x (sh + 2 sleeps): the processes whose end the test checks really exist
  CHECK(wait_for_marker_processes(p.marker(), 1 + 1 + 3 * 3, 5s) >= 1 + 1 + 3 * 3);
  p.send_signal(SIGKILL);
  const Finished f = p.wait(10s);
  CHECK(f.term_signal == SIGKILL);
  require_no_strays(p);
}

TEST_CASE("supervision: --max-restarts re-runs the whole group with the restart count",
          "[integration][supervision]") {
  TempDir dir;
  const std::string script =
      "echo \"attempt $TORCHELASTIC_RESTART_COUNT port $MASTER_PORT\" >> \"$OUT/log.$LOCAL_RANK\"; "
      "if [ $TORCHELASTIC_RESTART_COUNT -lt 2 ] && [ $LOCAL_RANK = 1 ]; then exit 5; fi; "
      "if [ $TORCHELASTIC_RESTART_COUNT -lt 2 ]; then exec sleep 60; fi; echo done-$LOCAL_RANK";

  SECTION("enough restarts: the third attempt succeeds") {
    NpuRunProcess p(sh_workers(3, script, {"--max-restarts", "2", "--log-dir", dir.file("logs")}),
                    {{"OUT", dir.path()}});
    const Finished f = p.wait(30s);
    INFO(f.err);
    CHECK(f.exit_code == 0);
    CHECK(count_occurrences(f.out, "done-") == 3);
    CHECK_THAT(f.err, Contains("restart 1 of 2") && Contains("restart 2 of 2"));
    // Rank 1 always logs before failing; the others may be stopped before they write.
    CHECK(read_file(dir.file("log.1")).find("attempt 0 port") == 0);
    std::set<std::string> ports;
    for (int r = 0; r < 3; ++r) {
      std::istringstream lines(read_file(dir.file("log." + std::to_string(r))));
      std::vector<std::string> attempts;
      for (std::string line; std::getline(lines, line);) {
        attempts.push_back(line.substr(0, line.find(" port")));
        ports.insert(line.substr(line.find("port ")));
      }
      REQUIRE_FALSE(attempts.empty());
      CHECK(attempts.back() == "attempt 2");
      if (r == 1)
        CHECK(attempts == std::vector<std::string>{"attempt 0", "attempt 1", "attempt 2"});
    }
    CHECK(ports.size() == 1);  // the held worker port survives restarts
    const std::string run = run_dir(dir.file("logs"));
    for (int a = 0; a < 3; ++a)
      CHECK(std::filesystem::is_directory(run + "/attempt_" + std::to_string(a) + "/1"));
    require_no_strays(p);
  }
  SECTION("restarts exhausted: the last failure decides the exit code") {
    NpuRunProcess p(sh_workers(3, script, {"--max-restarts", "1"}), {{"OUT", dir.path()}});
    const Finished f = p.wait(30s);
    INFO(f.err);
    CHECK(f.exit_code == 5);
    CHECK_THAT(f.err, Contains("restart 1 of 1") && Contains("attempt 1; root cause first"));
    CHECK(f.err.find("restart 2") == std::string::npos);
    require_no_strays(p);
  }
}

}  // namespace test_supervision
