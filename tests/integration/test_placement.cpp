// Ranks placed for the network, in launches: nodes on loopback with host names of their own
// (UTS namespaces), each told where it sits by the fake hccn_tool's LLDP neighbour, the fake
// npu-smi's SuperPoD, Slurm's topology address or a --topology file; the ranks they get, the
// place npu_run status shows, the logical SuperPoDs --sp-block cuts, and the job refused when
// its nodes cannot be cut into them.
#include <fmt/format.h>

#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <thread>

#include "support/harness.hpp"
#include "support/nodes.hpp"
#include "support/temp_dir.hpp"

namespace test_placement {

using namespace npu_run::testing;
using Catch::Matchers::Contains;

namespace {

// Each worker of local rank 0 writes its node's seat: "<host> <HCCL_LOGIC_SUPERPOD_ID>", then
// waits for `go` when WAIT is set.
const char* const kWorker =
    "[ \"$LOCAL_RANK\" = 0 ] && echo \"$(hostname) $HCCL_LOGIC_SUPERPOD_ID\" > "
    "\"$OUT/seat.$GROUP_RANK\"; "
    "while [ -n \"$WAIT\" ] && [ ! -e \"$OUT/go\" ]; do sleep 0.05; done";

struct PlacedNodes {
  TempDir dir;
  int port = unused_port();
  std::vector<std::unique_ptr<NpuRunProcess>> nodes;

  PlacedNodes() {
    for (int i = 0; i < 2; ++i) dir.write("dev/davinci" + std::to_string(i), "");
  }
  // A node named `host` with the fake tools' `scenario`.
  NpuRunProcess& start(const std::string& host, const std::string& nnodes,
                       const std::string& scenario, std::vector<std::string> flags = {},
                       EnvOverrides env = {}) {
    std::vector<std::string> args = {
        "--nnodes",      nnodes,      "--nproc-per-node", "2",
        "--master-addr", "127.0.0.1", "--master-port",    std::to_string(port)};
    args.insert(args.end(), kFastHeartbeats.begin(), kFastHeartbeats.end());
    args.insert(args.end(), flags.begin(), flags.end());
    for (const char* a : {"--no-python", "/bin/sh", "-c", kWorker}) args.emplace_back(a);
    env[kHostNameVariable] = host;
    env["NPU_RUN_DEV_ROOT"] = dir.path() + "/dev";
    env["NPU_RUN_FAKE_SCENARIO"] = dir.write("scenario." + host, scenario);
    env["PATH"] = source_dir() + "/tests/tools/fake_tools:" + std::getenv("PATH");
    env["OUT"] = dir.path();
    if (!env.count("WAIT")) env["WAIT"] = "";
    nodes.push_back(std::make_unique<NpuRunProcess>(args, env));
    return *nodes.back();
  }
  std::vector<Finished> wait_all() {
    std::vector<NpuRunProcess*> all;
    for (auto& n : nodes) all.push_back(n.get());
    auto done = NpuRunProcess::wait_all(all, 60s);
    for (auto& n : nodes) require_no_strays(*n);
    return done;
  }
  // Waits for every node; each must have exited 0, its log shown when it did not.
  void all_succeed() {
    for (const Finished& f : wait_all()) {
      INFO(f.err);
      CHECK(f.exit_code == 0);
    }
  }
  // Seat -> "<host> <block>", as the workers wrote them.
  std::vector<std::string> seats(size_t count) const {
    std::vector<std::string> out;
    for (size_t i = 0; i < count; ++i) {
      std::string line = read_file(dir.path() + "/seat." + std::to_string(i));
      while (!line.empty() && (line.back() == '\n' || line.back() == ' ')) line.pop_back();
      out.push_back(line);
    }
    return out;
  }
};

}  // namespace

TEST_CASE("placement: nodes are seated by the switch their devices are cabled to, not by name",
          "[integration][placement]") {
  PlacedNodes job;
  // Host names interleave the two leaf switches; node1 and node3 arrive first.
  const std::map<std::string, std::string> leaf{
      {"node1", "leaf-b"}, {"node3", "leaf-b"}, {"node2", "leaf-a"}, {"node10", "leaf-a"}};
  for (const char* host : {"node1", "node3", "node10", "node2"}) {
    job.start(host, "4", "switch " + leaf.at(host) + "\n", {}, {{"WAIT", "1"}});
  }
  job.nodes.front()->wait_for_output("leaf-b (lldp)", 1, 20s, true);
  // npu_run status names each node's place while the job runs.
  Finished status;
  for (int i = 0; i < 100; ++i) {
    status = run_npu_run(
        {"status", "--master-addr", "127.0.0.1", "--master-port", std::to_string(job.port)}, {},
        30s);
    if (status.out.find("ranks 6-7") != std::string::npos) break;
    std::this_thread::sleep_for(100ms);
  }
  CHECK_THAT(status.out, Contains("node 0  node2") && Contains("place: switch leaf-a (lldp)") &&
                             Contains("node 3  node3") && Contains("place: switch leaf-b (lldp)"));
  job.dir.write("go", "");
  job.all_succeed();
  CHECK(job.seats(4) == std::vector<std::string>{"node2", "node10", "node1", "node3"});
}

TEST_CASE("placement: where no node knows its place, host names in natural order",
          "[integration][placement]") {
  PlacedNodes job;
  for (const char* host : {"node10", "node9", "node1"}) job.start(host, "3", "");
  job.all_succeed();
  CHECK(job.seats(3) == std::vector<std::string>{"node1", "node9", "node10"});
  // --node-order arrival keeps the order the joins came in: node10's first here.
  PlacedNodes arrival;
  arrival.start("node10", "2", "", {"--node-order", "arrival"})
      .wait_for_output("waiting for 1 more node", 1, 20s, true);
  arrival.start("node9", "2", "", {"--node-order", "arrival"});
  arrival.all_succeed();
  CHECK(arrival.seats(2) == std::vector<std::string>{"node10", "node9"});
}

TEST_CASE("placement: under Slurm the topology address orders the nodes, not SLURM_NODEID",
          "[integration][placement][cluster]") {
  PlacedNodes job;
  for (int id = 0; id < 2; ++id) {
    EnvOverrides env = slurm_step_env(id);
    env["SLURM_TOPOLOGY_ADDR"] = fmt::format("s0.{}.n{}", id == 0 ? "s9" : "s2", id + 1);
    env["SLURM_TOPOLOGY_ADDR_PATTERN"] = "switch.switch.node";
    job.start(fmt::format("n{}", id + 1), "2", "", {}, env);
  }
  const auto done = job.wait_all();
  for (const Finished& f : done) {
    INFO(f.err);
    CHECK(f.exit_code == 0);
  }
  CHECK_THAT(done[1].err, Contains("this node's place in the network: switch s0 > s2 (slurm)"));
  // SLURM_NODEID 0 (on s9) hosts the rendezvous, and its seat follows n2's (on s2).
  CHECK(job.seats(2) == std::vector<std::string>{"n2", "n1"});
}

TEST_CASE("placement: a --topology file places the nodes it lists, and --dry-run shows the place",
          "[integration][placement]") {
  PlacedNodes job;
  const std::string file =
      job.dir.write("topology", "alpha pod1/spine1/leaf7\nbeta pod1/spine0/leaf2\n");
  for (const char* host : {"alpha", "beta"}) job.start(host, "2", "", {"--topology", file});
  job.all_succeed();
  CHECK(job.seats(2) == std::vector<std::string>{"beta", "alpha"});
  PlacedNodes plan;
  NpuRunProcess& dry = plan.start("alpha", "2", "", {"--topology", file, "--dry-run"});
  const Finished f = dry.wait(30s);
  CHECK(f.exit_code == 0);
  CHECK_THAT(f.out, Contains("placement: nodes in topology order; this node: switch pod1 > "
                             "spine1 > leaf7 (--topology)"));
}

TEST_CASE(
    "placement: --sp-block cuts logical SuperPoDs of adjacent ranks, one per SuperPoD's "
    "pair of nodes, into HCCL_LOGIC_SUPERPOD_ID",
    "[integration][placement][superpod]") {
  PlacedNodes job;
  const std::map<std::string, std::string> pod{{"h1", "2"}, {"h2", "1"}, {"h3", "2"}, {"h4", "1"}};
  for (const char* host : {"h1", "h2", "h3", "h4"}) {
    job.start(host, "4", fmt::format("a3\nsuperpod {} {}\n", pod.at(host), host[1]),
              {"--sp-block", "4"});
  }
  job.all_succeed();
  CHECK(job.seats(4) == std::vector<std::string>{"h2 1-0", "h4 1-0", "h1 2-0", "h3 2-0"});
}

TEST_CASE("placement: nodes that cannot be cut into whole blocks end the job before any worker",
          "[integration][placement][superpod]") {
  PlacedNodes job;
  const std::map<std::string, std::string> pod{{"h1", "1"}, {"h2", "1"}, {"h3", "1"}, {"h4", "2"}};
  for (const char* host : {"h1", "h2", "h3", "h4"}) {
    job.start(host, "4", fmt::format("a3\nsuperpod {} 0\n", pod.at(host)), {"--sp-block", "4"});
  }
  for (const Finished& f : job.wait_all()) {
    INFO(f.err);
    CHECK(f.exit_code == 125);
    CHECK_THAT(f.err, Contains("--sp-block 4: the 3 nodes of SuperPoD 1 hold 6 devices"));
  }
  CHECK_FALSE(std::filesystem::exists(job.dir.path() + "/seat.0"));
}

TEST_CASE("placement: a tool that hangs costs its call's timeout once, and the job goes on",
          "[integration][placement]") {
  PlacedNodes job;
  // hccn_tool sleeps as the real one does while it retries a device that is not ready.
  for (const char* host : {"node2", "node1"}) {
    job.start(host, "2", "hang hccn_tool:-lldp\n", {"--health-timeout", "30,1"});
  }
  const auto done = job.wait_all();
  for (const Finished& f : done) {
    INFO(f.err);
    CHECK(f.exit_code == 0);
    CHECK(f.seconds < 15);
    CHECK_THAT(f.err, !Contains("place in the network"));
  }
  CHECK(job.seats(2) == std::vector<std::string>{"node1", "node2"});
}

}  // namespace test_placement
