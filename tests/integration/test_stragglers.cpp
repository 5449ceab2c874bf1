// The straggler watch (--straggler, issue 48 point 4) in real two-node jobs on loopback: each
// node's agent samples its ranks' flight recorders through torch's worker server while gloo
// all_reduces run. Mid-run, node 1's agent and workers are moved into a cgroup v1 CPU quota
// (cpu.cfs_quota_us): node 1 is named in the log, `npu_run status` and the report with what it
// cost, and with --straggler replace a spare takes its seat. A healthy run names nobody. The
// recorder is torch 2.8's and later: with torch 1.13 the agents say they read nothing, and name
// nobody. [serial]: the cases compare CPU shares, so ctest runs them alone; [pytorch]: with torch
// 1.13 in the plain tree, with 2.14 in the ASan tree (tests/ctest/integration_runs.cmake).
#include <fmt/format.h>

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <map>

#include "support/cpu_quota.hpp"
#include "support/fixtures.hpp"
#include "support/harness.hpp"
#include "support/nodes.hpp"
#include "support/temp_dir.hpp"

namespace test_stragglers {

using namespace npu_run::testing;
using Catch::Matchers::Contains;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

namespace {

// A training loop on one thread: a little compute, then an all_reduce, until rank 0 finds
// `stop` (the test writes it) and tells everyone in the same all_reduce.
std::string training(TempDir& dir) {
  const std::string stop = dir.file("stop");
  return dir.write("train.py",
                   fmt::format("import os, torch, torch.distributed as dist\n"
                               "torch.set_num_threads(1)\n"
                               "dist.init_process_group('gloo')\n"
                               "rank = int(os.environ['RANK'])\n"
                               "w = torch.randn(192, 192)\n"
                               "flag = torch.zeros(1)\n"
                               "step = 0\n"
                               "while True:\n"
                               "    for _ in range(4):\n"
                               "        w = torch.tanh(w @ w)\n"
                               "    flag[0] = 1.0 if rank == 0 and os.path.exists('{}') else 0.0\n"
                               "    dist.all_reduce(flag)\n"
                               "    step += 1\n"
                               "    if step % 100 == 0:\n"
                               "        print(f'rank {{rank}} step {{step}}', flush=True)\n"
                               "    if flag[0] > 0:\n"
                               "        break\n",
                               stop));
}

struct Job {
  TempDir dir;
  std::string script = training(dir);
  int port = unused_port();
  std::string window = "2";  // --straggler-window
  std::vector<std::unique_ptr<NpuRunProcess>> nodes;

  NpuRunProcess& start(int rank, std::vector<std::string> extra = {}) {
    std::vector<std::string> args = {
        "--nnodes",           "2",         "--nproc-per-node",    "2",
        "--master-addr",      "127.0.0.1", "--master-port",       std::to_string(port),
        "--straggler-window", window,      "--heartbeat-timeout", "10"};
    if (rank >= 0) args.insert(args.end(), {"--node-rank", std::to_string(rank)});
    args.insert(args.end(), extra.begin(), extra.end());
    args.push_back(script);
    nodes.push_back(std::make_unique<NpuRunProcess>(
        args, EnvOverrides{{kHostNameVariable, fmt::format("sg-{}", nodes.size())}}));
    return *nodes.back();
  }
  void stop() const { std::ofstream(dir.file("stop")) << "stop\n"; }
  std::vector<Finished> wait_all() {
    std::vector<NpuRunProcess*> all;
    for (auto& n : nodes) all.push_back(n.get());
    const std::vector<Finished> done = NpuRunProcess::wait_all(all, 120s);
    for (auto& n : nodes) require_no_strays(*n);
    return done;
  }
};

bool has_recorder() {
  return torch_version() >= std::make_pair(2, 8);
}

}  // namespace

TEST_CASE("stragglers: a node slowed mid-run is named in the log and status with its cost",
          "[integration][straggler][serial][pytorch]") {
  CpuQuota quota(15);
  if (!quota.made) {
    WARN("no writable cgroup v1 cpu controller here");
    return;
  }
  Job job;
  const std::string logs = job.dir.file("logs");
  const int metrics = unused_port();
  NpuRunProcess& n0 = job.start(
      0, {"--log-dir", logs, "--report", "--metrics-port", "127.0.0.1:" + std::to_string(metrics)});
  NpuRunProcess& n1 = job.start(1);
  n0.wait_for_output("rank 0 step 100", 1, 90s);
  if (!has_recorder()) {
    CHECK(n0.saw_output("the straggler watch has read nothing on this node for 4 s", 1, 20s, true));
    job.stop();
    for (const Finished& f : job.wait_all()) CHECK(f.exit_code == 0);
    return;
  }
  const auto slowed = std::chrono::steady_clock::now();
  quota.take(n1.pid());
  const bool named = n0.saw_output("straggler: node 1 (sg-1, ranks 2-3)", 1, 60s, true);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - slowed).count();
  WARN(fmt::format("slowed to named in the log: {:.1f} s (2 s windows)", seconds));
  CHECK(named);
  const Finished status = run_npu_run(
      {"status", "--master-addr", "127.0.0.1", "--master-port", std::to_string(job.port)}, {}, 30s);
  INFO(status.out << status.err);
  CHECK_THAT(status.out, Contains("straggler: node 1 (sg-1, ranks 2-3) entered collectives last"));
  // The metrics name it too, in a text Prometheus' own checker accepts.
  const std::string scraped = job.dir.file("metrics.txt");
  auto [curl_rc, curl_out] = shell(fmt::format(
      "curl -sS --max-time 5 http://127.0.0.1:{}/metrics > {} && promtool check metrics < {}",
      metrics, scraped, scraped));
  INFO(curl_out);
  CHECK(curl_rc == 0);
  std::ifstream scrape(scraped);
  const std::string text(std::istreambuf_iterator<char>(scrape), {});
  CHECK_THAT(text, Contains("npu_run_straggler{node_rank=\"1\",rank=\"") &&
                       Contains("host=\"sg-1\"} 0.") &&
                       Contains("npu_run_straggler_cost_seconds{"));
  job.stop();
  const std::vector<Finished> done = job.wait_all();
  INFO(done[0].err);
  CHECK(done[0].exit_code == 0);
  CHECK_THAT(done[0].err, Contains("keeping its peers waiting") &&
                              Contains("--straggler replace would hand its seat to a ready spare"));
  // The report lists it, from the timeline's event.
  std::string page;
  for (const auto& run : fs::directory_iterator(logs)) {
    std::ifstream in(run.path() / "report.html");
    page.assign(std::istreambuf_iterator<char>(in), {});
    if (!page.empty()) break;
  }
  CHECK_THAT(page, Contains("<h2>Stragglers</h2>") && Contains("<td>1 (sg-1)</td>") &&
                       Contains("entered collectives last"));
}

TEST_CASE("stragglers: with --straggler replace a spare takes the slowed node's seat",
          "[integration][straggler][serial][pytorch]") {
  if (!has_recorder()) return;  // nothing to name without a recorder (the case above says so)
  CpuQuota quota(15);
  if (!quota.made) {
    WARN("no writable cgroup v1 cpu controller here");
    return;
  }
  Job job;
  const std::vector<std::string> replace = {"--straggler", "replace", "--spares", "1"};
  NpuRunProcess& n0 = job.start(0, replace);
  NpuRunProcess& n1 = job.start(1, replace);
  n0.wait_for_output("rank 0 step 100", 1, 90s);
  job.start(-1, replace).wait_for_output("standing by as a spare", 1, 30s, true);
  // Its workers slowed, not its agent: the case is the seat handed over, and an agent starved
  // past its heartbeat timeout (an ASan build as Linux 3.10 under CI's load, once) is lost
  // instead of dismissed, which the case above and the elastic ones cover.
  quota.take_children(n1.pid());
  n0.wait_for_output("its seat goes to a ready spare", 1, 60s, true);
  n0.wait_for_output("rank 0 step 100", 2, 90s);  // the round with the spare trains
  job.stop();
  const std::vector<Finished> done = job.wait_all();
  INFO(done[0].err);
  CHECK(done[0].exit_code == 0);
  CHECK(done[1].exit_code == 0);  // dismissed: taken out, not failed
  CHECK(done[2].exit_code == 0);
  CHECK_THAT(done[0].err, Contains("is taken out of the job") && Contains("a straggler: node 1"));
  CHECK_THAT(done[1].err, Contains("a spare takes its seat"));
}

// A healthy run at windows of a second (the noisiest the watch allows), long enough for five
// windows: a false alarm needs three in a row over the threshold. Once here; ten times and more
// as a benchmark (scripts/bench/false_alarms.py), where the rare false alarm is counted.
TEST_CASE("stragglers: a healthy run at one-second windows names no straggler",
          "[integration][straggler][serial][pytorch]") {
  if (!has_recorder()) return;  // nothing is judged without a recorder
  Job job;
  job.window = "1";
  NpuRunProcess& n0 = job.start(0);
  job.start(1);
  n0.wait_for_output("rank 0 step 100", 1, 90s);
  ::usleep(5'000'000);
  job.stop();
  const std::vector<Finished> done = job.wait_all();
  for (const Finished& f : done) {
    INFO(f.err);
    CHECK(f.exit_code == 0);
    CHECK_THAT(f.err, !Contains("straggler: "));
  }
}

}  // namespace test_stragglers
