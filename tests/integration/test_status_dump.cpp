// `npu_run status --dump` during real runs (issue 46): every running rank's records are collected
// on every node, nothing is stopped, and the rank they put apart is named; the job goes on. Each
// test gives its agents and its status commands a TMPDIR of their own (agents keep their sockets
// there), so that other tests' agents running meanwhile are not asked.
#include <catch2/catch.hpp>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "support/fixtures.hpp"
#include "support/harness.hpp"
#include "support/nodes.hpp"
#include "support/temp_dir.hpp"

namespace test_status_dump {

using namespace npu_run::testing;
using Catch::Matchers::Contains;
using namespace std::chrono_literals;

namespace {

// A training loop over gloo that never beats itself: all_reduce of a 4,096-float gradient, then
// the optimizer's step; at step 5 rank 2 stalls in its data loader for an hour.
std::string stalling_script(TempDir& dir) {
  return dir.write("train.py",
                   "import os, time, torch, torch.distributed as dist\n"
                   "rank = int(os.environ['RANK'])\n"
                   "dist.init_process_group('gloo')\n"
                   "w = torch.nn.Parameter(torch.ones(4096))\n"
                   "opt = torch.optim.SGD([w], lr=0.1)\n"
                   "def load_batch(step):\n"
                   "    if rank == 2 and step == 5:\n"
                   "        time.sleep(3600)\n"
                   "    return torch.ones(4096)\n"
                   "for step in range(12):\n"
                   "    w.grad = load_batch(step).clone()\n"
                   "    dist.all_reduce(w.grad)\n"
                   "    opt.step()\n"
                   "    time.sleep(0.05)\n");
}

// `npu_run status --json` until every rank of `ranks` beat `beats` times and then nothing for a
// second: the job is where the test wants it.
bool settled(const EnvOverrides& env, size_t ranks, int beats) {
  for (const auto until = std::chrono::steady_clock::now() + 90s;
       std::chrono::steady_clock::now() < until; ::usleep(300'000)) {
    const Finished s = run_npu_run({"status", "--json"}, env, 30s);
    if (s.exit_code != 0) continue;
    const auto j = nlohmann::json::parse(s.out);
    size_t ready = 0;
    for (const auto& node : j["nodes"]) {
      for (const auto& r : node["ranks"])
        ready += r["beats"] == beats && r["age_ms"].get<int64_t>() >= 1000 ? 1 : 0;
    }
    if (ready == ranks) return true;
  }
  return false;
}

// Each rank serves torch_npu's dump pipe as the recorder watchdog's test does (there is no NPU
// here), and waits: rank 2 in a sleep, the others on an event, so that the kernel shows rank 2
// elsewhere.
std::string pipe_stand_in(TempDir& dir) {
  return dir.write("worker.py",
                   "import os, threading, time\n"
                   "rank = os.environ['RANK']\n"
                   "prefix = os.environ['TORCH_HCCL_DEBUG_INFO_TEMP_FILE']\n"
                   "pipe = os.environ['TORCH_HCCL_DEBUG_INFO_PIPE_FILE'] + rank + '.pipe'\n"
                   "os.mkfifo(pipe)\n"
                   "def asked():\n"
                   "    while True:\n"
                   "        with open(pipe) as p:\n"
                   "            p.readline()\n"
                   "        with open(prefix + rank, 'w') as d:\n"
                   "            d.write('asked through the pipe')\n"
                   "threading.Thread(target=asked, daemon=True).start()\n"
                   "open(os.environ['READY_DIR'] + '/' + rank, 'w').close()\n"
                   "if rank == '2':\n"
                   "    time.sleep(3600)\n"
                   "threading.Event().wait()\n");
}

void wait_for_files(const std::string& dir, size_t count) {
  for (const auto until = std::chrono::steady_clock::now() + 60s;
       std::chrono::steady_clock::now() < until; ::usleep(100'000)) {
    size_t n = 0;
    for ([[maybe_unused]] const auto& e : std::filesystem::directory_iterator(dir)) ++n;
    if (n >= count) return;
  }
  FAIL("the workers did not start within 60 s");
}

}  // namespace

TEST_CASE(
    "status dump: a running job's records collected without stopping it, the stalled "
    "rank put apart",
    "[integration][status][pytorch]") {
  TempDir dir;
  const std::string tmp = dir.file("tmp");
  const std::string logs = dir.file("logs");
  std::filesystem::create_directory(tmp);
  // The user's own sitecustomize imports torch.distributed before npu_run's hooks look (a patch
  // of it there is a common fix): the worker server must start all the same (torch 2.5 on).
  dir.write("site/sitecustomize.py", "import torch.distributed\n");
  const EnvOverrides env{{"TMPDIR", tmp}, {"PYTHONPATH", dir.file("site")}};
  // Three ranks: two that agree against the stalled one, one torch process fewer than four.
  NpuRunProcess job({"--nproc-per-node", "3", "--log-dir", logs, stalling_script(dir)}, env);
  REQUIRE(settled(env, 3, 5));
  const Finished d = run_npu_run({"status", "--dump"}, env, 30s);
  INFO(d.out << d.err);
  CHECK(d.exit_code == 0);
  CHECK_THAT(d.out, Contains("job 'none': running"));
  CHECK_THAT(d.out, Contains("dump 1: 3 ranks on 1 node answered in"));
  CHECK_THAT(d.out, Contains("apart: rank 2"));
  // What each torch offers: 1.13 no worker server (the kernel's view), 2.6 a server without a
  // recorder (the Python stacks decide), 2.14 the recorder (the collective names the rank).
  const auto version = torch_version();
  if (version < std::make_pair(2, 5)) {
    CHECK_THAT(d.out, Contains("[no worker server: the kernel's view]"));
  } else if (version < std::make_pair(2, 8)) {
    CHECK_THAT(d.out, Contains("apart: rank 2 on ") && Contains("is in train.py:8 in load_batch"));
  } else {
    CHECK_THAT(d.out, Contains("apart: rank 2 never entered all_reduce #6 of the default group, "
                               "which ranks 0 and 1 entered"));
    CHECK(std::filesystem::exists(std::filesystem::directory_iterator(logs)->path() /
                                  "attempt_0/1/dump_1/fr_trace.json"));
  }
  // Nothing was stopped: a second dump (dump 2) finds the same three workers, alive.
  const Finished again = run_npu_run({"status", "--dump", "--json"}, env, 30s);
  INFO(again.out << again.err);
  REQUIRE(again.exit_code == 0);
  const auto j = nlohmann::json::parse(again.out);
  CHECK(j["phase"] == "running");
  CHECK(j["dump"]["id"] == 2);
  CHECK(j["dump"]["odd_ranks"][0] == 2);
  REQUIRE(j["dump"]["nodes"][0]["stacks"].size() == 3);
  for (const auto& rank : j["dump"]["nodes"][0]["stacks"]) {
    const int pid = rank["pid"].get<int>();
    CHECK_THAT(d.out, Contains(" pid " + std::to_string(pid) + " "));
    CHECK(::kill(pid, 0) == 0);
  }
  job.send_signal(SIGTERM);
  CHECK(job.wait(30s).exit_code == 143);
  require_no_strays(job);
}

TEST_CASE(
    "status dump: every node of a two-node job asked, through an agent and through the "
    "rendezvous, and the dumps asked of the recorders are no hang",
    "[integration][status][multi-node]") {
  TempDir dir;
  const std::string tmp = dir.file("tmp");
  const std::string ready = dir.file("ready");
  std::filesystem::create_directory(tmp);
  std::filesystem::create_directory(ready);
  const std::string worker = "exec /usr/bin/python3 " + pipe_stand_in(dir);
  const int port = unused_port();
  const EnvOverrides agents{
      {"TMPDIR", tmp}, {"NPU_RUN_RDZV_TOKEN", "s3cret-token"}, {"READY_DIR", ready}};
  const std::string logs = dir.file("logs");
  auto n0 = start_node(port, 2, 2, worker, {"--node-rank", "0", "--log-dir", logs}, agents);
  auto n1 = start_node(port, 2, 2, worker, {"--node-rank", "1", "--log-dir", logs}, agents);
  wait_for_files(ready, 4);
  const Finished d = run_npu_run({"status", "--dump"}, {{"TMPDIR", tmp}}, 30s);
  INFO(d.out << d.err);
  CHECK(d.exit_code == 0);
  CHECK_THAT(d.out, Contains("dump 1: 4 ranks on 2 nodes answered in"));
  CHECK_THAT(d.out, Contains("  rank 3  node 1 "));
  CHECK_THAT(d.out, Contains("apart: rank 2 on ") && Contains("(kernel)"));
  CHECK(count_occurrences(d.out, "records: ") == 2);
  // Every rank's recorder was asked through its pipe, and wrote its dump where the watch of
  // the recorders' watchdogs looks: that is the answer, not a hang. Once the dumps are there,
  // the watch (every 0.5 s) is given two looks at them before the job is asked again.
  const auto pipe_dumps_written = [&] {
    size_t n = 0;
    for (const auto& e : std::filesystem::recursive_directory_iterator(logs))
      n += e.path().filename().string().rfind("hccl_trace_rank_", 0) == 0 ? 1 : 0;
    return n;
  };
  for (const auto until = std::chrono::steady_clock::now() + 10s;
       pipe_dumps_written() < 4 && std::chrono::steady_clock::now() < until;)
    ::usleep(100'000);
  ::usleep(1'000'000);
  const Finished direct = run_npu_run(
      {"status", "--dump", "--master-addr", "127.0.0.1", "--master-port", std::to_string(port)},
      {{"NPU_RUN_RDZV_TOKEN", "s3cret-token"}}, 30s);
  INFO(direct.out << direct.err);
  CHECK(direct.exit_code == 0);
  CHECK_THAT(direct.out, Contains("job 'none': running"));
  CHECK_THAT(direct.out, Contains("dump 2: 4 ranks on 2 nodes"));
  CHECK(pipe_dumps_written() == 4);
  CHECK_THAT(direct.out, Contains("apart: rank 2 on "));
  n0->send_signal(SIGTERM);
  const auto done = NpuRunProcess::wait_all({n0.get(), n1.get()}, 40s);
  for (const Finished& f : done) CHECK(f.exit_code == 143);
  require_no_strays(*n0);
  require_no_strays(*n1);
}

TEST_CASE("status dump: none while the job waits for its nodes, and not with --stop",
          "[integration][status][multi-node]") {
  TempDir dir;
  const std::string tmp = dir.file("tmp");
  std::filesystem::create_directory(tmp);
  auto n0 = start_node(unused_port(), 2, 1, "sleep 60", {"--node-rank", "0"}, {{"TMPDIR", tmp}});
  n0->wait_for_output("waiting for node ranks 1", 1, 30s, true);
  const Finished d = run_npu_run({"status", "--dump"}, {{"TMPDIR", tmp}}, 30s);
  INFO(d.out << d.err);
  CHECK(d.exit_code == 1);
  CHECK_THAT(d.out, Contains("job 'none': joining"));
  CHECK_THAT(
      d.out,
      Contains("dump: none collected: the job is waiting for its nodes: no worker runs yet"));
  const Finished both = run_npu_run({"status", "--dump", "--stop"}, {{"TMPDIR", tmp}}, 30s);
  CHECK(both.exit_code == 2);
  CHECK_THAT(both.err, Contains("--dump collects the records of a running job and --stop ends "
                                "it: give one"));
  n0->send_signal(SIGTERM);
  n0->wait(30s);
  require_no_strays(*n0);
}

}  // namespace test_status_dump
