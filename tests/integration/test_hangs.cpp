// Hung workers with real Python workers (issue 18): progress beats through NPU_RUN_PROGRESS
// and python/npu_run_progress.py, --hang-timeout (fixed and learned) and --exit-timeout; on a
// hang every worker's Python stacks are dumped by faulthandler (real output), the hung rank is
// named, the job fails with 124 or restarts, and nothing is left behind.
#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>

#include "support/fixtures.hpp"
#include "support/harness.hpp"
#include "support/nodes.hpp"
#include "support/private_mounts.hpp"
#include "support/temp_dir.hpp"

namespace test_hangs {

using namespace npu_run::testing;
using Catch::Matchers::Contains;

namespace {

// A worker script: beats five times, then does what `then` says (Python, indented by 0).
std::string worker_script(TempDir& dir, const std::string& then) {
  const std::string path = dir.file("worker.py");
  std::ofstream(path) << "import os, sys, threading, time\n"
                         "sys.path.insert(0, '"
                      << source_dir()
                      << "/python')\n"
                         "import npu_run_progress\n"
                         "rank = int(os.environ['LOCAL_RANK'])\n"
                         "attempt = int(os.environ['TORCHELASTIC_RESTART_COUNT'])\n"
                         "for step in range(5):\n"
                         "    npu_run_progress.beat(f'step {step}')\n"
                         "    time.sleep(0.05)\n"
                      << then;
  return path;
}

// Rank 1 deadlocks between two threads; the others keep beating until they are stopped, and
// spend nearly all their time in one place (the sleep), so that the dump finds both there: a
// rank caught inside beat() has other top frames, and with two of three ranks disagreeing no
// rank is the odd one out.
const char* kRank1Deadlocks =
    "def take_locks(first, second):\n"
    "    with first:\n"
    "        time.sleep(0.2)\n"
    "        with second:\n"
    "            pass\n"
    "a, b = threading.Lock(), threading.Lock()\n"
    "if rank == 1 and attempt == 0:\n"
    "    other = threading.Thread(target=take_locks, args=(b, a), name='loader')\n"
    "    other.start()\n"
    "    take_locks(a, b)\n"
    "while True:\n"
    "    npu_run_progress.beat('step busy')\n"
    "    if attempt > 0: sys.exit(0)\n"
    "    time.sleep(0.5)\n";

// As in a collective, every rank waits for the others (in threading's wait), but global rank
// `odd` beats once more, later, and then sits in its data loader: the others' timers run out
// first, and `odd` is the odd one out.
std::string odd_rank_loads(int odd) {
  return "def load_data():\n"
         "    time.sleep(3600)\n"
         "if int(os.environ['RANK']) == " +
         std::to_string(odd) +
         ":\n"
         "    time.sleep(0.5)\n"
         "    npu_run_progress.beat('step 5 loading')\n"
         "    load_data()\n"
         "threading.Event().wait()\n";
}

}  // namespace

TEST_CASE("hangs: a rank that stops beating is found, every rank's stacks are dumped, exit 124",
          "[integration][hangs]") {
  TempDir dir;
  NpuRunProcess p(
      {"--nproc-per-node", "3", "--hang-timeout", "2", worker_script(dir, kRank1Deadlocks)});
  const Finished f = p.wait(40s);
  INFO(f.err);
  CHECK(f.exit_code == 124);
  CHECK_THAT(f.err, Contains("local rank 1 (rank 1) hung: no progress for 2 s after 'step 4'"));
  // faulthandler's own output, from every rank: the deadlocked threads of rank 1 among them.
  // (Their writes may interleave on the shared console; each word is one write.)
  CHECK(count_occurrences(f.err, "Aborted") == 3);
  // (Function names only: the words around them may interleave with another rank's dump.)
  CHECK_THAT(f.err, Contains("take_locks"));
  // The summary: the hung rank first, as the root cause.
  CHECK_THAT(f.err, Contains("root cause first"));
  const auto table = f.err.find("root cause first");
  REQUIRE(table != std::string::npos);
  // Its stack differs from the two busy ranks': the odd one out, stuck where the dump says.
  CHECK(f.err.find("hung: no progress for 2.", table) != std::string::npos);
  CHECK(f.err.find("after 'step 4'; stuck in worker.py:", table) != std::string::npos);
  CHECK(f.err.find("in take_locks <- worker.py:", table) != std::string::npos);
  CHECK(f.err.find("(the odd one out: 2 of 3 ranks were in worker.py:", table) !=
        std::string::npos);
  CHECK(count_occurrences(f.err.substr(table), "<- the odd one out") == 1);
  // Where every rank got to: the hung one's last beat, the others' recent ones, and each one's
  // top frames.
  CHECK(f.err.find("last beat: 'step 4', 2.", table) != std::string::npos);
  CHECK(f.err.find("last beat: 'step busy', 0.", table) != std::string::npos);
  CHECK(count_occurrences(f.err.substr(table), "      stack: ") == 3);
  CHECK(f.seconds < 30);
  require_no_strays(p);
}

TEST_CASE("hangs: when every rank goes silent the odd one out is blamed, not the first timer",
          "[integration][hangs]") {
  // Ranks 0, 1 and 3 wait for the others; rank 2 is the odd one (odd_rank_loads).
  TempDir dir;
  const std::string worker = worker_script(dir, odd_rank_loads(2));
  NpuRunProcess p({"--nproc-per-node", "4", "--hang-timeout", "2", worker});
  const Finished f = p.wait(40s);
  INFO(f.err);
  CHECK(f.exit_code == 124);
  CHECK_THAT(f.err, !Contains("local rank 2 (rank 2) hung"));  // another rank's timer found it
  const auto table = f.err.find("root cause first");
  REQUIRE(table != std::string::npos);
  const std::string summary = f.err.substr(table);
  // Rank 2's row comes first, as the root cause, with where it was.
  const auto root_row = summary.find("\n  *");
  REQUIRE(root_row != std::string::npos);
  CHECK(summary.find(" 2      ", root_row) < summary.find('\n', root_row + 1));
  CHECK_THAT(summary, Contains("hung: no progress for 1.") || Contains("hung: no progress for 2."));
  CHECK_THAT(summary, Contains("after 'step 5 loading'; stuck in worker.py:"));
  CHECK_THAT(summary, Contains("in load_data <- worker.py:"));
  CHECK_THAT(summary, Contains("(the odd one out: 3 of 4 ranks were in threading.py:"));
  CHECK(count_occurrences(summary, "<- the odd one out") == 1);
  CHECK(count_occurrences(summary, "in wait <- threading.py:") == 3);
  require_no_strays(p);
}

TEST_CASE("hangs: a redirected stderr is read back from its file for the summary's stacks",
          "[integration][hangs]") {
  TempDir dir;
  const std::string logs = dir.file("logs");
  NpuRunProcess p({"--nproc-per-node", "3", "--hang-timeout", "2", "--log-dir", logs, "--redirects",
                   "2", worker_script(dir, kRank1Deadlocks)});
  const Finished f = p.wait(40s);
  INFO(f.err);
  CHECK(f.exit_code == 124);
  CHECK(count_occurrences(f.err, "Aborted") == 0);  // the dumps went to the files only
  CHECK_THAT(f.err, Contains("stuck in worker.py:") && Contains("in take_locks <- worker.py:"));
  CHECK(count_occurrences(f.err, "      stack: ") == 3);
  require_no_strays(p);
}

TEST_CASE("hangs: a hang is a failure: with a restart left the job runs again and succeeds",
          "[integration][hangs]") {
  TempDir dir;
  NpuRunProcess p({"--nproc-per-node", "2", "--hang-timeout", "1.5", "--max-restarts", "1",
                   worker_script(dir, kRank1Deadlocks)});
  const Finished f = p.wait(40s);
  INFO(f.err);
  CHECK(f.exit_code == 0);
  CHECK_THAT(f.err, Contains("hung: no progress for"));
  CHECK_THAT(f.err, Contains("restarting all 2 workers: restart 1 of 1"));
  require_no_strays(p);
}

TEST_CASE("hangs: --hang-timeout auto learns from the beats' intervals, with a floor",
          "[integration][hangs]") {
  TempDir dir;
  // Beats 0.3 s apart: 5 x 0.3 = 1.5 s, above the 1 s floor given.
  const std::string script = worker_script(dir,
                                           "for step in range(5, 10):\n"
                                           "    time.sleep(0.3)\n"
                                           "    npu_run_progress.beat(f'step {step}')\n"
                                           "if rank == 0: time.sleep(3600)\n");
  NpuRunProcess p({"--nproc-per-node", "2", "--hang-timeout", "auto:1", script});
  const Finished f = p.wait(40s);
  INFO(f.err);
  CHECK(f.exit_code == 124);
  CHECK_THAT(f.err, Contains("local rank 0 (rank 0) hung: no progress for"));
  CHECK_THAT(f.err, Contains("after 'step 9'"));
  // The learned timeout, not the floor (the longest interval is at least 0.3 s).
  CHECK_THAT(f.err, !Contains("--hang-timeout 1 s)"));
  require_no_strays(p);
}

TEST_CASE("hangs: --exit-timeout finds a worker that never exits after the others exited 0",
          "[integration][hangs]") {
  TempDir dir;
  // Rank 2's main returns, but a non-daemon thread keeps its process alive (as gloo's did).
  const std::string script = worker_script(
      dir,
      "if rank == 2:\n"
      "    threading.Thread(target=time.sleep, args=(3600,), name='stuck').start()\n");
  NpuRunProcess p({"--nproc-per-node", "3", "--exit-timeout", "1", script});
  const Finished f = p.wait(40s);
  INFO(f.err);
  CHECK(f.exit_code == 124);
  CHECK_THAT(f.err, Contains("local rank 2 (rank 2) hung: still running 1 s after the other 2 "
                             "local workers exited 0"));
  CHECK(count_occurrences(f.err, "Aborted") == 1);
  require_no_strays(p);
}

TEST_CASE("hangs: bad --hang-timeout and --exit-timeout values are refused before anything starts",
          "[integration][hangs]") {
  for (const auto& [flag, value] :
       std::vector<std::pair<std::string, std::string>>{{"--hang-timeout", "soon"},
                                                        {"--hang-timeout", "auto:-3"},
                                                        {"--hang-timeout", "-1"},
                                                        {"--exit-timeout", "-2"}}) {
    const Finished f =
        run_npu_run({"--nproc-per-node", "1", flag, value, "--no-python", "/bin/true"});
    INFO(flag << " " << value << ": " << f.err);
    CHECK(f.exit_code == 2);
    CHECK_THAT(f.err, Contains(flag));
    CHECK_THAT(f.err, Contains(value));
  }
}

TEST_CASE(
    "hangs: --max-no-progress-restarts stops restarting a job that never gets further, exit 123",
    "[integration][hangs]") {
  TempDir dir;
  // Every attempt beats up to 'step 4' and hangs there: the first attempt progressed, the
  // restarts did not.
  const std::string script = worker_script(dir, "time.sleep(3600)\n");
  NpuRunProcess p({"--nproc-per-node", "2", "--hang-timeout", "1", "--max-restarts", "5",
                   "--max-no-progress-restarts", "2", script});
  const Finished f = p.wait(60s);
  INFO(f.err);
  CHECK(f.exit_code == 123);
  CHECK_THAT(f.err, Contains("restart 2 of 5"));
  CHECK_THAT(f.err, !Contains("restart 3 of 5"));
  CHECK_THAT(f.err, Contains("no rank beat past its best in the last 2 restarts"));
  require_no_strays(p);
}

TEST_CASE("hangs: across two nodes the odd rank is named everywhere and every node's workers dump",
          "[integration][hangs][multi-node]") {
  TempDir dir;
  // Every rank goes silent, as in a collective; global rank 3 (node 1, local rank 1) beats
  // once more, later, and sits in a function of its own. A timer on node 0 (or rank 2's on
  // node 1) runs out first; the job's comparison of the four stacks blames rank 3. (Whether
  // every node dumps at one moment is what the DDP end-to-end test sees.)
  const std::string worker = worker_script(dir, odd_rank_loads(3));
  const int port = unused_port();
  const std::string script = "exec /usr/bin/python3 " + worker;
  auto n0 = start_node(port, 2, 2, script, {"--node-rank", "0", "--hang-timeout", "2"});
  auto n1 = start_node(port, 2, 2, script, {"--node-rank", "1", "--hang-timeout", "2"});
  const auto done = NpuRunProcess::wait_all({n0.get(), n1.get()}, 40s);
  for (size_t i = 0; i < done.size(); ++i) {
    const Finished& f = done[i];
    INFO("node " << i << ": " << f.err);
    CHECK(f.exit_code == 124);
    CHECK_THAT(f.err, Contains("the job failed; root cause: rank 3 (local 1, pid"));
    CHECK_THAT(f.err, Contains("after 'step 5 loading'; stuck in worker.py:"));
    CHECK_THAT(f.err, Contains("(the odd one out: 3 of 4 ranks were in threading.py:"));
    CHECK(count_occurrences(f.err, "Aborted") == 2);  // this node's two workers dumped
    CHECK(count_occurrences(f.err, "      stack: ") == 2);
  }
  CHECK_THAT(done[0].err, Contains("local rank 0 (rank 0) hung") ||
                              Contains("local rank 1 (rank 1) hung") ||
                              Contains("collecting the stacks of this node's 2 running workers"));
  CHECK_THAT(done[1].err, Contains("load_data"));
  CHECK_THAT(done[1].err, Contains("<- the odd one out"));
  CHECK_THAT(done[0].err, !Contains("<- the odd one out"));
  CHECK_THAT(done[0].err, Contains("last beat: 'step 4', 2."));  // where node 0's ranks were
  require_no_strays(*n0);
  require_no_strays(*n1);
}

TEST_CASE("hangs: for a worker that is not Python the kernel's view of its threads is logged",
          "[integration][hangs]") {
  // Rank 1 never exits after rank 0 did; it is a shell's sleep, not Python.
  NpuRunProcess p({"--nproc-per-node", "2", "--exit-timeout", "1", "--no-python", "/bin/sh", "-c",
                   "if [ $LOCAL_RANK = 1 ]; then exec sleep 60; fi"});
  const Finished f = p.wait(30s);
  INFO(f.err);
  CHECK(f.exit_code == 124);
  CHECK_THAT(f.err, Contains("local rank 1 (rank 1) hung: still running 1 s after the other 1 "
                             "local worker exited 0"));
  CHECK_THAT(f.err, Contains("is not Python; what the kernel shows of it:"));
  CHECK_THAT(f.err, Contains("(sleep): wchan "));
  CHECK_THAT(f.err, Contains("      stack: (kernel) "));  // its top frames in the summary
  require_no_strays(p);
}

TEST_CASE("hangs: without a place for the progress sockets, --hang-timeout is refused by name",
          "[integration][hangs]") {
  // TMPDIR too long for a socket's path, and /tmp read-only (a private mount namespace; its
  // contents stay, since the build under test may be there).
  const std::string long_tmp =
      "/var/tmp/npu_run_test_" + std::to_string(::getpid()) + "_" + std::string(90, 'x');
  std::filesystem::create_directories(long_tmp);
  INFO("a mount namespace needs root, as the suite's namespace tests do");
  REQUIRE(make_read_only("/tmp"));
  const EnvOverrides env{{"TMPDIR", long_tmp}};
  const Finished refused = run_npu_run(
      {"--nproc-per-node", "1", "--hang-timeout", "60", "--no-python", "/bin/true"}, env);
  INFO(refused.err);
  CHECK(refused.exit_code == 1);
  CHECK_THAT(refused.err, Contains("--hang-timeout/--exit-timeout: cannot create a directory for "
                                   "the progress sockets") &&
                              Contains(long_tmp + ": too long for a socket's path") &&
                              Contains("/tmp: Read-only file system") &&
                              Contains("set TMPDIR to a writable directory"));
  // Without hang detection the job runs; its workers only lack NPU_RUN_PROGRESS.
  const Finished ran = run_npu_run(
      {"--nproc-per-node", "1", "--no-python", "/bin/sh", "-c", "test -z \"$NPU_RUN_PROGRESS\""},
      env);
  INFO(ran.err);
  CHECK(ran.exit_code == 0);
  CHECK_THAT(ran.err, Contains("workers get no NPU_RUN_PROGRESS"));
  std::filesystem::remove_all(long_tmp);
}

}  // namespace test_hangs
