// Multi-node jobs on loopback: one npu_run process per "node", joined through the TCP rendezvous:
// a job formed across nodes, failures and restarts on every node, lost and frozen nodes, SIGTERM.
#include <catch2/catch.hpp>
#include <csignal>
#include <fstream>
#include <map>
#include <set>
#include <thread>

#include "support/harness.hpp"
#include "support/nodes.hpp"
#include "support/temp_dir.hpp"

namespace test_multi_node {

using namespace npu_run::testing;
using Catch::Matchers::Contains;

TEST_CASE("multi-node: two nodes with different worker counts form one job",
          "[integration][multi-node]") {
  TempDir dir;
  const int port = unused_port();
  const std::string script = "env > \"$OUT/env.$RANK\"";
  auto a = start_node(port, 2, 2, script, {}, {{"OUT", dir.path()}});
  auto b = start_node(port, 2, 3, script, {}, {{"OUT", dir.path()}});
  const auto done = NpuRunProcess::wait_all({a.get(), b.get()}, 30s);
  const Finished& fa = done[0];
  const Finished& fb = done[1];
  INFO(fa.err << "\n----\n" << fb.err);
  CHECK(fa.exit_code == 0);
  CHECK(fb.exit_code == 0);
  std::set<std::string> ports;
  std::map<std::string, int> workers_per_group;
  for (int rank = 0; rank < 5; ++rank) {
    std::ifstream in(dir.file("env." + std::to_string(rank)));
    REQUIRE(in);
    std::map<std::string, std::string> env;
    for (std::string line; std::getline(in, line);) {
      const auto eq = line.find('=');
      if (eq != std::string::npos) env[line.substr(0, eq)] = line.substr(eq + 1);
    }
    CHECK(env["WORLD_SIZE"] == "5");
    CHECK(env["GROUP_WORLD_SIZE"] == "2");
    CHECK(env["MASTER_ADDR"] == "127.0.0.1");
    CHECK(env["MASTER_PORT"] == std::to_string(port));  // the store shares the rendezvous port
    ports.insert(env["MASTER_PORT"]);
    ++workers_per_group[env["GROUP_RANK"]];
    // A node's ranks are contiguous: rank = offset + local rank.
    const int local = std::stoi(env["LOCAL_RANK"]);
    CHECK(std::stoi(env["LOCAL_WORLD_SIZE"]) > local);
  }
  CHECK(ports.size() == 1);
  CHECK(workers_per_group.size() == 2);
  require_no_strays(*a);
  require_no_strays(*b);
}

TEST_CASE("multi-node: explicit node ranks are honoured whatever the start order",
          "[integration][multi-node]") {
  const int port = unused_port();
  std::vector<std::unique_ptr<NpuRunProcess>> nodes;
  for (int rank : {3, 1, 2, 0}) {
    nodes.push_back(start_node(port, 4, 2, "echo \"node $GROUP_RANK rank $RANK\"",
                               {"--node-rank", std::to_string(rank)}));
  }
  const int expected[] = {3, 1, 2, 0};
  const auto done = NpuRunProcess::wait_all(
      {nodes[0].get(), nodes[1].get(), nodes[2].get(), nodes[3].get()}, 30s);
  for (size_t i = 0; i < nodes.size(); ++i) {
    const Finished& f = done[i];
    INFO(f.err);
    CHECK(f.exit_code == 0);
    const int r = expected[i];
    CHECK(count_occurrences(
              f.out, "node " + std::to_string(r) + " rank " + std::to_string(2 * r) + "\n") == 1);
    CHECK(count_occurrences(f.out, "node " + std::to_string(r) + " rank " +
                                       std::to_string(2 * r + 1) + "\n") == 1);
    require_no_strays(*nodes[i]);
  }
}

TEST_CASE("multi-node: a worker failing on one node stops every node, all exit with its code",
          "[integration][multi-node]") {
  TempDir dir;
  const std::string gate = make_gate(dir.file("gate"));
  const int port = unused_port();
  const std::string sleeper = "echo ready; exec sleep 60";
  // One command on every node, as in a real job; what a rank does depends on its ranks.
  const std::string script = "if [ $GROUP_RANK = 2 ] && [ $LOCAL_RANK = 1 ]; then read x < " +
                             gate + "; exit 7; fi; " + sleeper;
  auto n0 = start_node(port, 3, 2, script, {"--node-rank", "0"});
  auto n1 = start_node(port, 3, 2, script, {"--node-rank", "1"});
  auto n2 = start_node(port, 3, 2, script, {"--node-rank", "2"});
  n0->wait_for_output("ready", 2, 20s);
  n1->wait_for_output("ready", 2, 20s);
  n2->wait_for_output("ready", 1, 20s);
  open_gate(gate);
  const auto done = NpuRunProcess::wait_all({n0.get(), n1.get(), n2.get()}, 20s);
  for (size_t i = 0; i < done.size(); ++i) {
    const Finished& f = done[i];
    NpuRunProcess* n = std::vector<NpuRunProcess*>{n0.get(), n1.get(), n2.get()}[i];
    INFO(f.err);
    CHECK(f.exit_code == 7);
    CHECK(f.seconds < 15);  // the sleepers were stopped, not waited for
    CHECK_THAT(f.err, Contains("root cause") && Contains("rank 5 (local 1, pid") &&
                          Contains("on node 2") && Contains("exit code 7"));
    require_no_strays(*n);
  }
}

TEST_CASE("multi-node: restarts run on every node with the same restart count",
          "[integration][multi-node]") {
  const int port = unused_port();
  const std::string script =
      "echo \"attempt $TORCHELASTIC_RESTART_COUNT node $GROUP_RANK\"; "
      "if [ $TORCHELASTIC_RESTART_COUNT = 0 ] && [ $RANK = 3 ]; then exit 4; fi; "
      "if [ $TORCHELASTIC_RESTART_COUNT = 0 ]; then exec sleep 60; fi";
  auto a = start_node(port, 2, 2, script, {"--max-restarts", "1", "--node-rank", "0"});
  auto b = start_node(port, 2, 2, script, {"--max-restarts", "1", "--node-rank", "1"});
  const auto done = NpuRunProcess::wait_all({a.get(), b.get()}, 30s);
  for (size_t i = 0; i < done.size(); ++i) {
    const Finished& f = done[i];
    NpuRunProcess* n = i == 0 ? a.get() : b.get();
    INFO(f.err);
    CHECK(f.exit_code == 0);
    CHECK(count_occurrences(f.out, "attempt 1 node") == 2);
    CHECK_THAT(f.err, Contains("restart 1 of 1"));
    require_no_strays(*n);
  }
}

TEST_CASE("multi-node: a SIGKILLed agent is noticed at once by the others",
          "[integration][multi-node]") {
  const int port = unused_port();
  auto a = start_node(port, 2, 2, "echo ready; exec sleep 60", {"--node-rank", "0"});
  auto b = start_node(port, 2, 2, "echo ready; exec sleep 60", {"--node-rank", "1"});
  a->wait_for_output("ready", 2, 20s);
  b->wait_for_output("ready", 2, 20s);
  b->send_signal(SIGKILL);
  const Finished f = a->wait(20s);
  INFO(f.err);
  CHECK(f.exit_code == 125);
  CHECK(f.seconds < 15);
  CHECK_THAT(f.err, Contains("root cause: node 1") && Contains("agent lost: connection closed"));
  b->wait(10s);
  require_no_strays(*a);
  require_no_strays(*b);  // the killed agent's workers died with it
}

TEST_CASE("multi-node: a frozen agent is noticed through missed heartbeats",
          "[integration][multi-node]") {
  const int port = unused_port();
  auto a = start_node(port, 2, 1, "echo ready; exec sleep 60", {"--node-rank", "0"});
  auto b = start_node(port, 2, 1, "echo ready; exec sleep 60", {"--node-rank", "1"});
  a->wait_for_output("ready", 1, 20s);
  b->wait_for_output("ready", 1, 20s);
  b->send_signal(SIGSTOP);
  const Finished f = a->wait(20s);
  INFO(f.err);
  CHECK(f.exit_code == 125);
  CHECK_THAT(f.err, Contains("no heartbeat for 1.5 s"));
  // Thawed, the partitioned agent finds the rendezvous gone, stops its workers and exits.
  b->send_signal(SIGCONT);
  const Finished fb = b->wait(20s);
  INFO(fb.err);
  CHECK(fb.exit_code == 125);
  require_no_strays(*a);
  require_no_strays(*b);
}

TEST_CASE("multi-node: a lost node is the root cause even if a peer's worker fails first",
          "[integration][multi-node]") {
  // Node 1 freezes; node 0's worker then fails (as a gloo rank does with "Connection reset by
  // peer" once its peer is gone) before the server notices the silence. The node failed when
  // it was last heard from, so it is the root cause and every node exits with its code.
  TempDir dir;
  const std::string gate = make_gate(dir.file("gate"));
  const int port = unused_port();
  const std::string script =
      "echo ready; if [ $GROUP_RANK = 0 ]; then read x < " + gate + "; exit 1; fi; exec sleep 60";
  auto a = start_node(port, 2, 1, script, {"--node-rank", "0"});
  auto b = start_node(port, 2, 1, script, {"--node-rank", "1"});
  a->wait_for_output("ready", 1, 20s);
  b->wait_for_output("ready", 1, 20s);
  b->send_signal(SIGSTOP);
  std::this_thread::sleep_for(500ms);  // a third of the heartbeat timeout (1.5 s)
  open_gate(gate);
  const Finished fa = a->wait(20s);
  b->send_signal(SIGCONT);
  const Finished fb = b->wait(20s);
  INFO(fa.err << "\n----\n" << fb.err);
  CHECK(fa.exit_code == 125);
  CHECK(fb.exit_code == 125);
  CHECK_THAT(fa.err, Contains("root cause: node 1") && Contains("agent lost: no heartbeat") &&
                         Contains("last heard from"));
  require_no_strays(*a);
  require_no_strays(*b);
}

TEST_CASE("multi-node: a lost server is noticed, by connection loss or silence",
          "[integration][multi-node]") {
  for (int sig : {SIGKILL, SIGSTOP}) {
    const int port = unused_port();
    auto server_node = start_node(port, 2, 1, "echo ready; exec sleep 60", {"--node-rank", "0"});
    auto other = start_node(port, 2, 1, "echo ready; exec sleep 60", {"--node-rank", "1"});
    server_node->wait_for_output("ready", 1, 20s);
    other->wait_for_output("ready", 1, 20s);
    server_node->send_signal(sig);
    const Finished f = other->wait(20s);
    INFO(f.err);
    CHECK(f.exit_code == 125);
    CHECK_THAT(f.err, Contains("rendezvous server at 127.0.0.1:" + std::to_string(port)));
    CHECK_THAT(f.err, Contains(sig == SIGKILL ? "lost the connection"
                                              : "sent nothing for longer than the heartbeat"));
    CHECK_THAT(f.err, Contains("because of the lost rendezvous"));
    require_no_strays(*other);
    if (sig == SIGSTOP) server_node->send_signal(SIGKILL);
    server_node->wait(10s);
    require_no_strays(*server_node);
  }
}

TEST_CASE("multi-node: SIGTERM to one agent ends the job on every node",
          "[integration][multi-node]") {
  // Node 1, then node 0, which also hosts the rendezvous: in a static job either ends it cleanly.
  for (int signalled : {1, 0}) {
    const int port = unused_port();
    auto a = start_node(port, 2, 1, "echo ready; exec sleep 60", {"--node-rank", "0"});
    auto b = start_node(port, 2, 1, "echo ready; exec sleep 60", {"--node-rank", "1"});
    a->wait_for_output("ready", 1, 20s);
    b->wait_for_output("ready", 1, 20s);
    (signalled == 0 ? a : b)->send_signal(SIGTERM);
    const auto done = NpuRunProcess::wait_all({a.get(), b.get()}, 20s);
    const Finished& other = done[signalled == 0 ? 1 : 0];
    INFO("signalled node " << signalled << "\n" << done[0].err << "\n----\n" << done[1].err);
    CHECK(done[0].exit_code == 143);
    CHECK(done[1].exit_code == 143);
    CHECK(done[0].seconds < 10);
    CHECK_THAT(other.err, Contains("root cause: node " + std::to_string(signalled)) &&
                              Contains("npu_run was stopped by SIGTERM"));
    require_no_strays(*a);
    require_no_strays(*b);
  }
}

}  // namespace test_multi_node
