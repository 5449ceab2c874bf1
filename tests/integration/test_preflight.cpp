// The pre-flight probe (--preflight, issue 48 point 3) in launches: nodes on loopback with host
// names of their own, each agent running its part of the probe with real torch and gloo. One
// node's agent, and with it its probe, runs in a cgroup v1 CPU quota (cpu.cfs_quota_us): it is
// named with its figures before any worker starts, and the static job exits 122. Healthy runs
// name nobody (once here; ten times as a benchmark, scripts/bench/false_alarms.py). Tagged
// [pytorch] where it also runs with torch 2.6 and 2.14.
#include <fmt/format.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "support/cpu_quota.hpp"
#include "support/fixtures.hpp"
#include "support/harness.hpp"
#include "support/nodes.hpp"
#include "support/temp_dir.hpp"

namespace test_preflight {

using namespace npu_run::testing;
using Catch::Matchers::Contains;
using namespace std::chrono_literals;
namespace fs = std::filesystem;

namespace {

// Each worker says it started: none may when the probe fails a node.
const char* const kWorker = "echo \"worker started on $(hostname)\"";

struct ProbedNodes {
  int port = unused_port();
  std::vector<std::unique_ptr<NpuRunProcess>> nodes;

  NpuRunProcess& start(int rank, int nnodes, const std::string& mode = "quick") {
    std::vector<std::string> args = {
        "--nnodes",      std::to_string(nnodes), "--nproc-per-node", "1",
        "--node-rank",   std::to_string(rank),   "--master-addr",    "127.0.0.1",
        "--master-port", std::to_string(port),   "--preflight",      mode};
    args.insert(args.end(), kFastHeartbeats.begin(), kFastHeartbeats.end());
    for (const char* a : {"--no-python", "/bin/sh", "-c", kWorker}) args.emplace_back(a);
    nodes.push_back(std::make_unique<NpuRunProcess>(
        args, EnvOverrides{{kHostNameVariable, fmt::format("pf-{}", rank)}}));
    return *nodes.back();
  }
  std::vector<Finished> wait_all() {
    std::vector<NpuRunProcess*> all;
    for (auto& n : nodes) all.push_back(n.get());
    const std::vector<Finished> done = NpuRunProcess::wait_all(all, 180s);
    for (auto& n : nodes) require_no_strays(*n);
    return done;
  }
};

}  // namespace

// [serial]: it compares CPU shares, so ctest runs it alone (tests/native_tests.cmake).
TEST_CASE("preflight: a node slowed by a CPU quota is named before any worker starts",
          "[integration][preflight][serial]") {
  CpuQuota quota(15);
  if (!quota.made) {
    WARN("no writable cgroup v1 cpu controller here");
    return;
  }
  ProbedNodes job;
  job.start(0, 4);
  job.start(1, 4);
  quota.enter();
  job.start(2, 4);
  CpuQuota::leave();
  job.start(3, 4);
  const std::vector<Finished> done = job.wait_all();
  for (const Finished& f : done) {
    INFO(f.err);
    CHECK(f.exit_code == 122);
    CHECK_THAT(f.out, !Contains("worker started"));
  }
  INFO(done[0].err);
  CHECK_THAT(done[0].err, Contains("1 of 4 nodes failed the health gate; no worker started") &&
                              Contains("node 2 (pf-2): preflight: ") && Contains("x the median"));
  // By its matmul, or (when the others' shares of the cores are as small) by its all_gathers,
  // once alone with a good partner in the second step.
  CHECK_THAT(done[0].err,
             Contains("preflight: matmul ") || Contains("preflight: all_gather with good"));
  CHECK_THAT(done[2].err, Contains("pre-flight probe, step 1: matmul "));
}

TEST_CASE("preflight: healthy nodes are probed, then the round forms with the probe's figures",
          "[integration][preflight][pytorch]") {
  ProbedNodes job;
  for (int rank = 0; rank < 3; ++rank) job.start(rank, 3);
  const std::vector<Finished> done = job.wait_all();
  for (const Finished& f : done) {
    INFO(f.err);
    CHECK(f.exit_code == 0);
    CHECK_THAT(f.out, Contains("worker started"));
    CHECK_THAT(f.err, Contains("pre-flight probe (quick, 3 nodes, ") &&
                          Contains("all_gather median") && !Contains("preflight:"));
  }
}

}  // namespace test_preflight
