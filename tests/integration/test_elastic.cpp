// Elastic jobs (--nnodes MIN:MAX) on loopback: nodes lost, frozen, leaving on purpose and
// arriving late, with the world size each new round gives the workers. One npu_run per "node".
#include <catch2/catch.hpp>
#include <csignal>
#include <filesystem>
#include <fstream>

#include "support/harness.hpp"
#include "support/temp_dir.hpp"

namespace test_elastic {

using namespace npu_run::testing;
using Catch::Matchers::Contains;

namespace {

// Each worker records the world size of its round in $OUT/ws<WORLD_SIZE>.r<RESTARTS>.<RANK>;
// in a round of `hold_world` workers it then waits to be stopped, in any other it exits 0.
std::string worker_script(int hold_world) {
  return "touch \"$OUT/ws$WORLD_SIZE.r$TORCHELASTIC_RESTART_COUNT.$RANK\"; echo \"ready $RANK\"; "
         "[ \"$WORLD_SIZE\" = " +
         std::to_string(hold_world) + " ] && exec sleep 60; exit 0";
}

// One node of an elastic job with one worker; the first one started hosts the rendezvous.
std::unique_ptr<NpuRunProcess> elastic_node(int port, const std::string& nnodes,
                                            const std::string& script, const std::string& out,
                                            std::vector<std::string> flags = {}) {
  std::vector<std::string> args = {"--nnodes",
                                   nnodes,
                                   "--nproc-per-node",
                                   "1",
                                   "--master-port",
                                   std::to_string(port),
                                   "--rdzv-last-call",
                                   "0.5",
                                   "--heartbeat-interval",
                                   "0.2",
                                   "--heartbeat-timeout",
                                   "1.5"};
  args.insert(args.end(), flags.begin(), flags.end());
  for (const char* a : {"--no-python", "/bin/sh", "-c"}) args.emplace_back(a);
  args.push_back(script);
  return std::make_unique<NpuRunProcess>(args, EnvOverrides{{"OUT", out}});
}

// Starts `count` nodes, the first alone until it serves the rendezvous.
std::vector<std::unique_ptr<NpuRunProcess>> start_nodes(
    int count, int port, const std::string& nnodes, const std::string& script,
    const std::string& out, const std::vector<std::string>& flags = {}) {
  std::vector<std::unique_ptr<NpuRunProcess>> nodes;
  nodes.push_back(elastic_node(port, nnodes, script, out, flags));
  nodes[0]->wait_for_output("rendezvous server on", 1, 20s, true);
  for (int i = 1; i < count; ++i) nodes.push_back(elastic_node(port, nnodes, script, out, flags));
  return nodes;
}

// start_nodes, then waits until every node's worker runs.
std::vector<std::unique_ptr<NpuRunProcess>> start_running(
    int count, int port, const std::string& nnodes, const std::string& script,
    const std::string& out, const std::vector<std::string>& flags = {}) {
  auto nodes = start_nodes(count, port, nnodes, script, out, flags);
  for (auto& n : nodes) n->wait_for_output("ready", 1, 20s);
  return nodes;
}

// Waits for the first `count` nodes together.
std::vector<Finished> wait_nodes(const std::vector<std::unique_ptr<NpuRunProcess>>& nodes,
                                 size_t count, milliseconds timeout) {
  std::vector<NpuRunProcess*> waited;
  for (size_t i = 0; i < count; ++i) waited.push_back(nodes[i].get());
  return NpuRunProcess::wait_all(waited, timeout);
}

bool exists(const std::string& dir, const std::string& name) {
  return std::filesystem::exists(dir + "/" + name);
}

}  // namespace

TEST_CASE("elastic: survivors of a SIGKILLed agent re-form with the smaller world size",
          "[integration][elastic]") {
  TempDir dir;
  const int port = unused_port();
  auto nodes = start_running(3, port, "2:3", worker_script(3), dir.path(), {"--max-restarts", "1"});
  nodes[2]->send_signal(SIGKILL);
  const auto done = wait_nodes(nodes, 2, 30s);
  INFO(done[0].err << "\n----\n" << done[1].err);
  CHECK(done[0].exit_code == 0);
  CHECK(done[1].exit_code == 0);
  // Round 1: two workers, restart count 1, ranks dense. A lost node is the infrastructure's
  // fault: the restart does not use up --max-restarts.
  CHECK(exists(dir.path(), "ws2.r1.0"));
  CHECK(exists(dir.path(), "ws2.r1.1"));
  CHECK_FALSE(exists(dir.path(), "ws2.r1.2"));
  CHECK_THAT(done[0].err, Contains("agent lost: connection closed") &&
                              Contains("[infrastructure: node ") && Contains(" was lost]") &&
                              Contains("not counted against --max-restarts (0 of 1 used)"));
  nodes[2]->wait(10s);
  for (auto& n : nodes) require_no_strays(*n);
}

TEST_CASE(
    "elastic: with no restarts left a lost node still shrinks the job (not the script's fault)",
    "[integration][elastic]") {
  TempDir dir;
  const int port = unused_port();
  auto nodes = start_running(3, port, "2:3", worker_script(3), dir.path());
  nodes[2]->send_signal(SIGKILL);
  const auto done = wait_nodes(nodes, 2, 30s);
  INFO(done[0].err);
  CHECK(done[0].exit_code == 0);
  CHECK(done[1].exit_code == 0);
  CHECK(exists(dir.path(), "ws2.r1.0"));
  CHECK(exists(dir.path(), "ws2.r1.1"));
  CHECK_THAT(done[0].err, Contains("agent lost: connection closed") &&
                              Contains("not counted against --max-restarts (0 of 0 used)"));
  nodes[2]->wait(10s);
  for (auto& n : nodes) require_no_strays(*n);
}

TEST_CASE("elastic: below MIN the survivor waits for replacements, then names the shortfall",
          "[integration][elastic]") {
  TempDir dir;
  const int port = unused_port();
  auto nodes = start_running(2, port, "2:3", worker_script(2), dir.path(),
                             {"--max-restarts", "1", "--rdzv-timeout", "3"});
  nodes[1]->send_signal(SIGKILL);
  const Finished f = nodes[0]->wait(30s);
  INFO(f.err);
  CHECK(f.exit_code == 125);
  CHECK_THAT(f.err, Contains("to reach the minimum of 2"));
  CHECK(f.seconds < 20);
  nodes[1]->wait(10s);
  for (auto& n : nodes) require_no_strays(*n);
}

TEST_CASE("elastic: a frozen agent is dropped after missed heartbeats and the rest go on",
          "[integration][elastic]") {
  TempDir dir;
  const int port = unused_port();
  auto nodes = start_running(3, port, "2:3", worker_script(3), dir.path(), {"--max-restarts", "1"});
  nodes[2]->send_signal(SIGSTOP);  // a partition, as far as the server can tell
  const auto done = wait_nodes(nodes, 2, 30s);
  INFO(done[0].err);
  CHECK(done[0].exit_code == 0);
  CHECK(done[1].exit_code == 0);
  CHECK_THAT(done[0].err, Contains("no heartbeat for 1.5 s"));
  CHECK(exists(dir.path(), "ws2.r1.1"));
  // Thawed, the dropped agent hears it is out, stops its worker and exits.
  nodes[2]->send_signal(SIGCONT);
  const Finished thawed = nodes[2]->wait(20s);
  INFO(thawed.err);
  CHECK(thawed.exit_code == 125);
  for (auto& n : nodes) require_no_strays(*n);
}

TEST_CASE("elastic: SIGTERM to one agent lets the others re-form without it",
          "[integration][elastic]") {
  TempDir dir;
  const int port = unused_port();
  auto nodes = start_running(3, port, "2:3", worker_script(3), dir.path());
  nodes[2]->send_signal(SIGTERM);
  const auto done = wait_nodes(nodes, 3, 30s);
  INFO(done[0].err << "\n----\n" << done[2].err);
  CHECK(done[2].exit_code == 143);
  CHECK(done[0].exit_code == 0);  // with --max-restarts 0: leaving is not a failure
  CHECK(done[1].exit_code == 0);
  CHECK(exists(dir.path(), "ws2.r0.1"));
  CHECK_THAT(done[0].err, Contains("left the job") && Contains("not counted as a restart"));
  for (auto& n : nodes) require_no_strays(*n);
}

TEST_CASE("elastic: a late agent scales a 2:4 job up without using a restart",
          "[integration][elastic]") {
  TempDir dir;
  const int port = unused_port();
  auto nodes = start_running(2, port, "2:4", worker_script(2), dir.path());
  nodes.push_back(elastic_node(port, "2:4", worker_script(2), dir.path()));
  const auto done = wait_nodes(nodes, 3, 30s);
  INFO(done[0].err << "\n----\n" << done[2].err);
  for (const Finished& f : done) CHECK(f.exit_code == 0);
  for (const char* name : {"ws3.r0.0", "ws3.r0.1", "ws3.r0.2"}) CHECK(exists(dir.path(), name));
  CHECK_THAT(done[0].err, Contains("round 0: the job re-forms as round 1 to add ") &&
                              Contains(" (3 nodes); stopping every node") &&
                              Contains("not counted as a restart"));
  // A node growing the job is not a failure: nothing about restarts used or failed rounds.
  for (const Finished& f : done) {
    CHECK(f.err.find("failed; restart") == std::string::npos);
    CHECK(f.err.find("node -1") == std::string::npos);
  }
  for (auto& n : nodes) require_no_strays(*n);
}

TEST_CASE("elastic: PyTorch DDP restarts with the new world size after a node is lost",
          "[integration][elastic]") {
  const std::string train = source_dir() + "/examples/train_ddp.py";
  const int port = unused_port();
  std::vector<std::unique_ptr<NpuRunProcess>> nodes;
  auto node = [&] {
    return std::make_unique<NpuRunProcess>(std::vector<std::string>{
        "--nnodes", "2:3", "--nproc-per-node", "1", "--master-port", std::to_string(port),
        "--rdzv-last-call", "0.5", "--heartbeat-interval", "0.2", "--heartbeat-timeout", "1.5",
        "--max-restarts", "1", train, "--steps", "25", "--step-seconds", "0.1"});
  };
  nodes.push_back(node());
  nodes[0]->wait_for_output("rendezvous server on", 1, 20s, true);
  nodes.push_back(node());
  nodes.push_back(node());
  nodes[0]->wait_for_output("step  10", 1, 60s);
  nodes[2]->send_signal(SIGKILL);
  const auto done = wait_nodes(nodes, 2, 90s);
  INFO(done[0].out << done[0].err << "\n----\n" << done[1].err);
  CHECK(done[0].exit_code == 0);
  CHECK(done[1].exit_code == 0);
  // Which survivor is rank 0 follows the order of their re-joins.
  const std::string out = done[0].out + done[1].out;
  CHECK_THAT(out, Contains("rank 0/2") && Contains("rank 1/2") && Contains("ranks agree: True"));
  nodes[2]->wait(10s);
  for (auto& n : nodes) require_no_strays(*n);
}

}  // namespace test_elastic
