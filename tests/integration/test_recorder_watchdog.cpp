// A flight recorder's own watchdog as a hang's trigger (agent/rooms/recorder_watch_room.cpp): the
// script never beats and no --hang-timeout is given; one rank's recorder finds a collective past
// its timeout and dumps itself, as torch_npu's does with TORCH_HCCL_DUMP_ON_TIMEOUT. npu_run
// takes the dump for a hang at once: every rank on every node is asked for its records (the
// others through their dump pipes) and stopped, and the job ends with the hang as its root
// cause. There is no NPU here: the stand-in below keeps torch_npu's contract (the variables, the
// pipe <prefix><rank>.pipe, the dump <prefix><rank>).
#include <catch2/catch.hpp>
#include <chrono>
#include <filesystem>
#include <sstream>

#include "support/fixtures.hpp"
#include "support/harness.hpp"
#include "support/nodes.hpp"
#include "support/temp_dir.hpp"

namespace test_recorder_watchdog {

using namespace npu_run::testing;
using Catch::Matchers::Contains;
using namespace std::chrono_literals;

namespace {

// Each rank serves its dump pipe; rank WATCHDOG_RANK's watchdog fires after a second.
std::string stand_in(TempDir& dir) {
  return dir.write("worker.py",
                   "import os, threading, time\n"
                   "rank = os.environ['RANK']\n"
                   "prefix = os.environ['TORCH_HCCL_DEBUG_INFO_TEMP_FILE']\n"
                   "pipe = os.environ['TORCH_HCCL_DEBUG_INFO_PIPE_FILE'] + rank + '.pipe'\n"
                   "os.mkfifo(pipe)\n"
                   "def dump(why):\n"
                   "    with open(prefix + rank, 'w') as d:\n"
                   "        d.write(why)\n"
                   "def asked():\n"
                   "    with open(pipe) as p:\n"
                   "        p.readline()\n"
                   "    dump('asked through the pipe')\n"
                   "threading.Thread(target=asked, daemon=True).start()\n"
                   "if rank == os.environ['WATCHDOG_RANK']:\n"
                   "    time.sleep(1)\n"
                   "    dump('the watchdog timed out')\n"
                   "time.sleep(3600)\n");
}

std::filesystem::path attempt_dir(const std::string& logs) {
  return std::filesystem::directory_iterator(logs)->path() / "attempt_0";
}

}  // namespace

TEST_CASE(
    "recorder watchdog: a rank's recorder that dumps itself on a timeout is a hang, found "
    "without --hang-timeout",
    "[integration][hangs]") {
  TempDir dir;
  const std::string logs = dir.path() + "/logs";
  const auto began = std::chrono::steady_clock::now();
  NpuRunProcess p({"--nproc-per-node", "3", "--log-dir", logs, stand_in(dir)},
                  {{"WATCHDOG_RANK", "1"}});
  const Finished f = p.wait(60s);
  const double took =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
  INFO(f.err);
  CHECK(f.exit_code == 124);
  CHECK(took < 12);  // the watchdog at 1 s, seen within half a second, collected within 3
  CHECK_THAT(f.err, Contains("local rank 1 (rank 1) hung: its flight recorder's watchdog found a "
                             "collective past its timeout"));
  // The summary's root cause row (marked *): rank 1, hung.
  const auto star = f.err.find("*  ", f.err.find("root cause first:"));
  REQUIRE(star != std::string::npos);
  std::istringstream row(f.err.substr(star, f.err.find('\n', star) - star));
  std::string mark, time, host, node, culprit;
  row >> mark >> time >> host >> node >> culprit;
  CHECK(culprit == "1");
  CHECK_THAT(row.str(), Contains("hung: its flight recorder's"));
  const auto attempt = attempt_dir(logs);
  CHECK(read_file((attempt / "1" / "hccl_trace_rank_1").string()) == "the watchdog timed out");
  for (const char* rank : {"0", "2"}) {
    const auto dump = attempt / rank / (std::string("hccl_trace_rank_") + rank);
    CHECK(read_file(dump.string()) == "asked through the pipe");
    CHECK_THAT(f.err, Contains("records: " + dump.string()));
  }
  require_no_strays(p);
}

TEST_CASE("recorder watchdog: one on another node stops every node, each naming the rank",
          "[integration][hangs][multi-node]") {
  TempDir dir;
  const std::string script = "exec /usr/bin/python3 " + stand_in(dir);
  const int port = unused_port();
  const EnvOverrides env{{"WATCHDOG_RANK", "3"}};
  auto n0 =
      start_node(port, 2, 2, script, {"--node-rank", "0", "--log-dir", dir.path() + "/n0"}, env);
  auto n1 =
      start_node(port, 2, 2, script, {"--node-rank", "1", "--log-dir", dir.path() + "/n1"}, env);
  const auto done = NpuRunProcess::wait_all({n0.get(), n1.get()}, 60s);
  for (size_t i = 0; i < done.size(); ++i) {
    INFO("node " << i << ": " << done[i].err);
    CHECK(done[i].exit_code == 124);
    CHECK_THAT(done[i].err, Contains("the job failed; root cause: rank 3 (local 1, pid"));
    CHECK_THAT(done[i].err, Contains("flight recorder's watchdog"));
  }
  // Node 0's ranks were asked for their records before they were stopped.
  const auto attempt = attempt_dir(dir.path() + "/n0");
  CHECK(read_file((attempt / "0" / "hccl_trace_rank_0").string()) == "asked through the pipe");
  require_no_strays(*n0);
  require_no_strays(*n1);
}

}  // namespace test_recorder_watchdog
