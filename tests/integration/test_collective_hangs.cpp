// A hang inside the collectives, named with no line added to the script (issue 46): real torch
// with gloo, scripts that never beat (the automatic beats find the hang), each culprit named
// within the hang timeout + 10 s. Tagged [pytorch]: the suite runs them with torch 1.13, 2.6 and
// 2.14. From torch 2.8 gloo has a flight recorder, and the rank is named from the records
// collected through the worker servers (rendezvous/state/collective_blame.hpp); before it, the
// stacks decide (2.6 still gives them through its server, 1.13 by SIGABRT) and the summary says the
// recorder was missing.
#include <catch2/catch.hpp>
#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "support/fixtures.hpp"
#include "support/harness.hpp"
#include "support/nodes.hpp"
#include "support/temp_dir.hpp"

namespace test_collective_hangs {

using namespace npu_run::testing;
using Catch::Matchers::Contains;
using namespace std::chrono_literals;

namespace {

bool has_flight_recorder() {
  return torch_version() >= std::make_pair(2, 8);
}

// A training loop over gloo that never beats: step after step, all_reduce the gradient of a
// 4,096-float parameter, then the optimizer's step. At step 5 one rank goes wrong as `mode` says.
std::string training_script(TempDir& dir) {
  return dir.write("train.py",
                   "import os, time, torch, torch.distributed as dist\n"
                   "rank = int(os.environ['RANK'])\n"
                   "mode = os.environ['HANG_MODE']\n"
                   "dist.init_process_group('gloo')\n"
                   "w = torch.nn.Parameter(torch.ones(4096))\n"
                   "opt = torch.optim.SGD([w], lr=0.1)\n"
                   "def load_batch(step):\n"
                   "    if mode == 'python' and rank == 2 and step == 5:\n"
                   "        time.sleep(3600)\n"
                   "    if mode == 'stop' and rank == 2 and step == 5:\n"
                   "        os.kill(os.getpid(), 19)\n"
                   "    return torch.ones(4096)\n"
                   "for step in range(12):\n"
                   "    w.grad = load_batch(step).clone()\n"
                   "    collective = dist.all_reduce\n"
                   "    if mode == 'desync' and rank == 1 and step == 5:\n"
                   "        collective = lambda t: dist.broadcast(t, 0)\n"
                   "    if not (mode == 'skip' and rank == 2 and step == 5):\n"
                   "        collective(w.grad)\n"
                   "    opt.step()\n"
                   "    time.sleep(0.05)\n"
                   "dist.barrier()\n"
                   "time.sleep(3600)\n");
}

// Three ranks: the fewest where the others agree against the culprit (two of three), and one
// torch process fewer than four on every torch the suite runs.
Finished run_three_ranks(TempDir& dir, const std::string& mode) {
  NpuRunProcess p({"--nproc-per-node", "3", "--hang-timeout", "3", "--log-dir",
                   dir.path() + "/logs", training_script(dir)},
                  {{"HANG_MODE", mode}});
  const Finished f = p.wait(120s);
  require_no_strays(p);
  return f;
}

bool has_worker_server() {
  return torch_version() >= std::make_pair(2, 5);
}

// Seconds from the log line holding `from` to the one holding `to` ("2026-11-28 16:00:26.173
// [npu_run ..."), or -1 when either is missing.
double seconds_between(const std::string& log, const std::string& from, const std::string& to) {
  auto stamp = [&](const std::string& marker) {
    const auto at = log.find(marker);
    if (at == std::string::npos) return -1.0;
    const auto line = log.rfind('\n', at) + 1;  // npos + 1 == 0: the first line
    int h = 0, m = 0;
    double sec = 0;
    if (std::sscanf(log.c_str() + line + 11, "%d:%d:%lf", &h, &m, &sec) != 3) return -1.0;
    return h * 3600.0 + m * 60.0 + sec;
  };
  const double a = stamp(from), b = stamp(to);
  return a < 0 || b < 0 ? -1.0 : b - a;
}

// The culprit is named within 10 s of the hang being found (the hang timeout after its start).
void check_named_soon(const Finished& f) {
  CHECK(f.exit_code == 124);
  const double seconds = seconds_between(f.err, "hung: no progress for 3 s", "root cause first");
  CHECK(seconds >= 0);
  CHECK(seconds < 10);
}

}  // namespace

TEST_CASE("collective hangs: a rank stuck in Python while the others wait in all_reduce",
          "[integration][hangs][pytorch]") {
  TempDir dir;
  const Finished f = run_three_ranks(dir, "python");
  INFO(f.err);
  check_named_soon(f);
  if (has_flight_recorder()) {
    CHECK_THAT(f.err, Contains("hung: rank 2 never entered all_reduce #6 of the default group, "
                               "which ranks 0 and 1 entered"));
    CHECK_THAT(f.err, Contains("rank 2 is in train.py:9 in load_batch"));
  } else {
    CHECK_THAT(f.err, Contains("stuck in train.py:9 in load_batch"));
    CHECK_THAT(f.err, Contains("(the odd one out: 2 of 3 ranks were in distributed_c10d.py:"));
    CHECK_THAT(f.err, Contains("no rank had a flight recorder"));
  }
  // What each rank's server answered is kept in its directory of the attempt.
  const auto attempt =
      std::filesystem::directory_iterator(dir.path() + "/logs")->path() / "attempt_0";
  CHECK(std::filesystem::exists(attempt / "2" / "stacks.txt") == has_worker_server());
  CHECK(std::filesystem::exists(attempt / "0" / "fr_trace.json") == has_flight_recorder());
  CHECK_THAT(f.err, Contains(has_worker_server() ? "asked 3 ranks' worker servers: 3 gave"
                                                 : "asked 3 ranks' worker servers: 0 gave"));
  // The timeline and the report list where the records are, the root cause's first.
  const std::string timeline = read_file((attempt.parent_path() / "timeline.json").string());
  CHECK((timeline.find("\"records\"") != std::string::npos) == has_worker_server());
  const Finished report = run_npu_run({"report", attempt.parent_path().string()}, {}, 30s);
  INFO(report.out << report.err);
  REQUIRE(report.exit_code == 0);
  const std::string page = read_file((attempt.parent_path() / "report.html").string());
  CHECK((page.find("Records kept by the hang's dump:</p><ul><li>rank 2 on ") !=
         std::string::npos) == has_worker_server());
  if (has_worker_server()) CHECK_THAT(page, Contains("/attempt_0/2/stacks.txt"));
}

TEST_CASE("collective hangs: a SIGSTOPped rank is named as the one that never reached the rest",
          "[integration][hangs][pytorch]") {
  TempDir dir;
  const Finished f = run_three_ranks(dir, "stop");
  INFO(f.err);
  check_named_soon(f);
  if (has_flight_recorder()) {
    CHECK_THAT(f.err, Contains("hung: rank 2 answered nothing through its worker server "
                               "(stopped, or stuck holding the GIL) and never reached where "
                               "ranks 0 and 1 wait: all_reduce #6 of the default group"));
  } else {
    CHECK_THAT(f.err, Contains("stuck in train.py:11 in load_batch"));
  }
}

TEST_CASE("collective hangs: a rank that calls another collective at the same number (a desync)",
          "[integration][hangs][pytorch]") {
  TempDir dir;
  const Finished f = run_three_ranks(dir, "desync");
  INFO(f.err);
  check_named_soon(f);
  if (has_flight_recorder()) {
    CHECK_THAT(f.err, Contains("hung: rank 1 called broadcast with 4,096 float32 where ranks 0 "
                               "and 2 called all_reduce with 4,096 float32, as collective #6 "
                               "of the default group (a desync)"));
  } else {
    CHECK_THAT(f.err, Contains(" in broadcast <- ") && Contains("<- the odd one out"));
  }
}

TEST_CASE("collective hangs: a rank that skips one collective falls behind and is named",
          "[integration][hangs][pytorch]") {
  TempDir dir;
  const Finished f = run_three_ranks(dir, "skip");
  INFO(f.err);
  check_named_soon(f);
  // Its sequence falls behind by one: gloo pairs its next all_reduce with the others' skipped
  // one, and at the end it reaches the barrier while they are still in all_reduce.
  if (has_flight_recorder()) {
    CHECK_THAT(f.err, Contains("hung: rank 2 called barrier where ranks 0 and 1 called "
                               "all_reduce with 4,096 float32, as collective #12"));
  } else {
    CHECK_THAT(f.err, Contains(" in barrier <- ") && Contains("<- the odd one out"));
  }
}

TEST_CASE("collective hangs: across two nodes every node names the rank that never entered",
          "[integration][hangs][multi-node][pytorch]") {
  TempDir dir;
  const std::string script = "exec " + test_python() + " " + training_script(dir);
  const int port = unused_port();
  const EnvOverrides env{{"HANG_MODE", "python"}};
  auto n0 = start_node(port, 2, 2, script, {"--node-rank", "0", "--hang-timeout", "3"}, env);
  auto n1 = start_node(port, 2, 2, script, {"--node-rank", "1", "--hang-timeout", "3"}, env);
  const auto done = NpuRunProcess::wait_all({n0.get(), n1.get()}, 120s);
  for (size_t i = 0; i < done.size(); ++i) {
    INFO("node " << i << ": " << done[i].err);
    CHECK(done[i].exit_code == 124);
    CHECK_THAT(done[i].err, Contains("the job failed; root cause: rank 2 (local 0, pid"));
    CHECK_THAT(done[i].err, Contains(has_flight_recorder()
                                         ? "rank 2 never entered all_reduce #6 of the default group"
                                         : "stuck in train.py:9 in load_batch"));
  }
  require_no_strays(*n0);
  require_no_strays(*n1);
}

}  // namespace test_collective_hangs

namespace test_collective_hangs {

TEST_CASE("collective hangs: torch_npu's recorder is asked through its dump pipe, not killed",
          "[integration][hangs]") {
  // A stand-in for torch_npu's watchdog (there is no NPU here): it makes the pipe
  // TORCH_HCCL_DEBUG_INFO_PIPE_FILE<rank>.pipe and, when a line comes, writes its dump to
  // TORCH_HCCL_DEBUG_INFO_TEMP_FILE<rank>, as torch_npu does; the main thread beats once, then
  // hangs.
  TempDir dir;
  const std::string worker =
      dir.write("worker.py",
                "import os, socket, threading, time\n"
                "rank = os.environ['RANK']\n"
                "pipe = os.environ['TORCH_HCCL_DEBUG_INFO_PIPE_FILE'] + rank + '.pipe'\n"
                "os.mkfifo(pipe)\n"
                "def watchdog():\n"
                "    with open(pipe) as p:\n"
                "        p.readline()\n"
                "    with open(os.environ['TORCH_HCCL_DEBUG_INFO_TEMP_FILE'] + rank, 'w') as d:\n"
                "        d.write('dumped by the watchdog')\n"
                "threading.Thread(target=watchdog, daemon=True).start()\n"
                "socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM).sendto(b'step 1', "
                "os.environ['NPU_RUN_PROGRESS'])\n"
                "time.sleep(3600)\n");
  NpuRunProcess p(
      {"--nproc-per-node", "2", "--hang-timeout", "2", "--log-dir", dir.path() + "/logs", worker});
  const Finished f = p.wait(60s);
  INFO(f.err);
  CHECK(f.exit_code == 124);
  const auto attempt =
      std::filesystem::directory_iterator(dir.path() + "/logs")->path() / "attempt_0";
  for (const char* rank : {"0", "1"}) {
    const auto dump = attempt / rank / (std::string("hccl_trace_rank_") + rank);
    CHECK_THAT(f.err, Contains("      records: " + dump.string()));
    CHECK(read_file(dump.string()) == "dumped by the watchdog");
  }
  require_no_strays(p);
}

}  // namespace test_collective_hangs

namespace test_collective_hangs {

TEST_CASE("collective hangs: the worker server's socket is the worker's, not its children's",
          "[integration][hangs]") {
  // npu_run's sitecustomize takes NPU_RUN_WORKER_SERVER out of the environment it passes on: a
  // Python child (multiprocessing's spawn, a subprocess) starting its own server there would
  // take the worker's socket away.
  TempDir dir;
  const std::string worker = dir.write(
      "worker.py",
      "import os, subprocess, sys\n"
      "child = subprocess.run([sys.executable, '-c', 'import os; "
      "print(os.environ.get(\"NPU_RUN_WORKER_SERVER\"))'], capture_output=True, text=True)\n"
      "print('child sees', child.stdout.strip())\n");
  const Finished f = run_npu_run({"--nproc-per-node", "1", "--hang-timeout", "30", worker});
  INFO(f.out << f.err);
  CHECK(f.exit_code == 0);
  CHECK_THAT(f.out, Contains("child sees None"));
}

}  // namespace test_collective_hangs
