// Multi-node jobs on loopback, the rendezvous' side: conflicting agents and jobs refused by name,
// unreachable, held and silent ports, addresses, npu_run rdzv-server, the exit barrier, limits.
#include <sys/resource.h>
#include <unistd.h>

#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/write.hpp>
#include <catch2/catch.hpp>
#include <csignal>
#include <fstream>
#include <sstream>
#include <thread>

#include "support/harness.hpp"
#include "support/nodes.hpp"
#include "support/private_mounts.hpp"
#include "support/temp_dir.hpp"

namespace test_multi_node_rendezvous {

using namespace npu_run::testing;
using Catch::Matchers::Contains;
namespace asio = boost::asio;

TEST_CASE("multi-node: conflicting agents are refused with what clashed",
          "[integration][multi-node]") {
  SECTION("different --nnodes") {
    const int port = unused_port();
    auto a = start_node(port, 2, 1, "true", {"--node-rank", "0", "--rdzv-timeout", "3"});
    auto b = start_node(port, 3, 1, "true", {"--node-rank", "1"});
    const auto done = NpuRunProcess::wait_all({a.get(), b.get()}, 20s);
    const Finished& fa = done[0];
    const Finished& fb = done[1];
    CHECK(fb.exit_code == 125);
    CHECK_THAT(fb.err, Contains("has --nnodes 3 but the job has --nnodes 2"));
    CHECK(fa.exit_code == 125);
    CHECK_THAT(fa.err, Contains("only 1 of 2 nodes joined within 3 s") && Contains("node ranks 1"));
  }
  SECTION("different run ids") {
    const int port = unused_port();
    auto a = start_node(port, 2, 1, "true", {"--run-id", "job-a", "--rdzv-timeout", "2"});
    auto b = start_node(port, 2, 1, "true", {"--run-id", "job-b", "--rdzv-timeout", "2"});
    const auto done = NpuRunProcess::wait_all({a.get(), b.get()}, 20s);
    const Finished& fa = done[0];
    const Finished& fb = done[1];
    CHECK(fa.exit_code == 125);
    CHECK(fb.exit_code == 125);
    // Either agent may have hosted the server; the other one was refused.
    CHECK_THAT(fa.err + fb.err,
               Contains("differs from the job's") && Contains("give every node the same --run-id"));
  }
  SECTION("two agents claiming one node rank") {
    const int port = unused_port();
    auto a = start_node(port, 3, 1, "true", {"--node-rank", "0", "--rdzv-timeout", "3"});
    auto b = start_node(port, 3, 1, "true", {"--node-rank", "1", "--rdzv-timeout", "3"});
    auto c = start_node(port, 3, 1, "true", {"--node-rank", "1", "--rdzv-timeout", "3"});
    const auto done = NpuRunProcess::wait_all({a.get(), b.get(), c.get()}, 20s);
    const Finished& fa = done[0];
    const Finished& fb = done[1];
    const Finished& fc = done[2];
    // Whichever of b and c came second was refused; the other waited for node 2 in vain.
    const std::string refused = fc.err.find("already holds") != std::string::npos ? fc.err : fb.err;
    CHECK_THAT(refused, Contains("claims --node-rank 1, which") && Contains("already holds"));
    CHECK(fa.exit_code == 125);
    CHECK_THAT(fa.err, Contains("still missing node ranks 2"));
  }
}

TEST_CASE("multi-node: an unreachable rendezvous names the endpoint and the timeout",
          "[integration][multi-node]") {
  const int port = unused_port();
  const Finished f =
      run_npu_run({"--nnodes", "2", "--node-rank", "1", "--master-port", std::to_string(port),
                   "--rdzv-timeout", "2", "--no-python", "/bin/true"});
  CHECK(f.exit_code == 125);
  CHECK_THAT(f.err, Contains("cannot reach the rendezvous server at 127.0.0.1:" +
                             std::to_string(port) + " within 2 s") &&
                        Contains("Connection refused"));
}

TEST_CASE("multi-node: a port held by another program is reported as such",
          "[integration][multi-node]") {
  asio::io_context io;
  asio::ip::tcp::acceptor impostor(io, {asio::ip::make_address("127.0.0.1"), 0});
  const int port = impostor.local_endpoint().port();
  // Answers every connection like a web server would, until told to stop.
  std::atomic<bool> stop{false};
  std::thread serve([&] {
    while (!stop) {
      boost::system::error_code ec;
      asio::ip::tcp::socket s(io);
      impostor.accept(s, ec);
      if (!ec && !stop)
        asio::write(s, asio::buffer(std::string("HTTP/1.1 400 Bad Request\r\n\r\n")), ec);
    }
  });
  // Without --node-rank the agent would host, finds the port served and joins as a client;
  // told it is node 0, it is the host and refuses at once.
  const Finished f = run_npu_run({"--nnodes", "2", "--master-port", std::to_string(port),
                                  "--rdzv-timeout", "5", "--no-python", "/bin/true"});
  const Finished node0 =
      run_npu_run({"--nnodes", "2", "--node-rank", "0", "--master-port", std::to_string(port),
                   "--rdzv-timeout", "5", "--no-python", "/bin/true"});
  // A blocking accept() is not woken by closing the acceptor from here: connect once more.
  stop = true;
  asio::ip::tcp::socket wake(io);
  wake.connect(impostor.local_endpoint());
  serve.join();
  CHECK(f.exit_code == 125);
  CHECK_THAT(f.err, Contains("is already served here; joining it as a client") &&
                        Contains("did not answer as an npu_run rendezvous server") &&
                        Contains("another program"));
  INFO(node0.err);
  CHECK(node0.exit_code == 125);
  CHECK(node0.seconds < 3);
  CHECK_THAT(node0.err, Contains("--node-rank 0 hosts the job's rendezvous, but 127.0.0.1:" +
                                 std::to_string(port) + " is already served by another program"));
}

TEST_CASE("multi-node: a master name with two addresses is served on both",
          "[integration][multi-node]") {
  // The name resolves to 127.0.0.1 and 127.0.0.2 (both this host's, on lo); node 1 can only
  // use the second. Node 0 serves every address of the name, and says so.
  TempDir dir;
  INFO("a private /etc/hosts needs a mount namespace, i.e. root");
  REQUIRE(replace_hosts_file("127.0.0.1 two-address-master\n127.0.0.2 two-address-master\n",
                             dir.path()));
  const int port = unused_port();
  auto a = start_node(port, 2, 1, "echo node $GROUP_RANK",
                      {"--node-rank", "0", "--master-addr", "two-address-master"});
  a->wait_for_output("rendezvous server on", 1, 20s, true);
  auto b = start_node(port, 2, 1, "echo node $GROUP_RANK",
                      {"--node-rank", "1", "--master-addr", "127.0.0.2", "--rdzv-timeout", "10"});
  const auto done = NpuRunProcess::wait_all({a.get(), b.get()}, 30s);
  INFO(done[0].err << "\n----\n" << done[1].err);
  CHECK(done[0].exit_code == 0);
  CHECK(done[1].exit_code == 0);
  CHECK_THAT(done[0].err, Contains("rendezvous server on 127.0.0.1:" + std::to_string(port) +
                                   " and 127.0.0.2:" + std::to_string(port)));
  require_no_strays(*a);
  require_no_strays(*b);
}

TEST_CASE("multi-node: two jobs on one port never merge, whatever the order they start in",
          "[integration][multi-node]") {
  // Two 2-node jobs with the default run id on one --master-port. Whichever agent binds first
  // hosts; the agents of the other job are refused by name, in every one of the 24 orders.
  std::vector<int> order = {0, 1, 2, 3};  // agents 0, 1 of job A; 2, 3 of job B
  int runs = 0;
  do {
    const int port = unused_port();
    std::vector<std::unique_ptr<NpuRunProcess>> agents(4);
    for (int who : order) {
      const std::string job = who < 2 ? "A" : "B";
      agents[static_cast<size_t>(who)] = start_node(
          port, 2, 1, "echo job-" + job + " rank $RANK; sleep 0.3", {"--rdzv-timeout", "10"});
      std::this_thread::sleep_for(20ms);
    }
    const auto done = NpuRunProcess::wait_all(
        {agents[0].get(), agents[1].get(), agents[2].get(), agents[3].get()}, 30s);
    std::string logs;
    for (const Finished& f : done) logs += f.err + "\n----\n";
    INFO("order " << order[0] << order[1] << order[2] << order[3] << "\n" << logs);
    // One job ran, both of its agents; the other's were refused, naming both commands.
    const bool a_ran = done[0].exit_code == 0;
    const size_t winner = a_ran ? 0 : 2;
    const size_t loser = a_ran ? 2 : 0;
    CHECK(done[winner].exit_code == 0);
    CHECK(done[winner + 1].exit_code == 0);
    const std::string job = a_ran ? "A" : "B";
    CHECK_THAT(done[winner].out + done[winner + 1].out,
               Contains("job-" + job + " rank 0") && Contains("job-" + job + " rank 1"));
    for (size_t i : {loser, loser + 1}) {
      CHECK(done[i].exit_code == 125);
      CHECK_THAT(done[i].err, Contains("but this job runs '--no-python /bin/sh -c echo job-" + job +
                                       " rank $RANK; sleep 0.3'"));
    }
    for (auto& agent : agents) require_no_strays(*agent);
    ++runs;
  } while (std::next_permutation(order.begin(), order.end()));
  CHECK(runs == 24);
}

TEST_CASE("multi-node: a listener that never answers the hello is retried, then named",
          "[integration][multi-node]") {
  // Never accepts: the kernel completes the handshakes and the hellos sit unread, just like
  // the half-open connections of an overflowing accept queue.
  asio::io_context io;
  asio::ip::tcp::acceptor silent(io, {asio::ip::make_address("127.0.0.1"), 0});
  const int port = silent.local_endpoint().port();
  const auto started = std::chrono::steady_clock::now();
  const Finished f = run_npu_run({"--nnodes", "2", "--node-rank", "1", "--master-addr", "127.0.0.1",
                                  "--master-port", std::to_string(port), "--rdzv-timeout", "2",
                                  "--no-python", "/bin/true"});
  const auto took = std::chrono::steady_clock::now() - started;
  CHECK(f.exit_code == 125);
  CHECK_THAT(f.err, Contains("cannot reach the rendezvous server at 127.0.0.1:" +
                             std::to_string(port) + " within 2 s") &&
                        Contains("no answer to the hello") && Contains("another program"));
  CHECK(took < 8s);  // bounded by --rdzv-timeout, not by TCP's retransmission limits
}

TEST_CASE("multi-node: npu_run rdzv-server runs the rendezvous on a host of its own",
          "[integration][multi-node]") {
  const int port = unused_port();
  NpuRunProcess server({"rdzv-server", "--port", std::to_string(port), "--nnodes", "2", "--host",
                        "127.0.0.1", "--heartbeat-interval", "0.2", "--heartbeat-timeout", "1.5"});
  server.wait_for_output("rendezvous server on 127.0.0.1", 1, 10s, true);
  auto a = start_node(port, 2, 1, "echo node $GROUP_RANK");
  auto b = start_node(port, 2, 1, "echo node $GROUP_RANK");
  const auto done = NpuRunProcess::wait_all({a.get(), b.get(), &server}, 20s);
  CHECK(done[0].exit_code == 0);
  CHECK(done[1].exit_code == 0);
  const Finished& fs = done[2];
  INFO(fs.err);
  CHECK(fs.exit_code == 0);
  CHECK_THAT(fs.err, Contains("job ended with exit code 0"));
  require_no_strays(server);
}

TEST_CASE("multi-node: --local-addr is the address peers and workers use",
          "[integration][multi-node]") {
  const int port = unused_port();
  // 127.0.0.2 is another loopback address: the connection to the server comes from 127.0.0.1,
  // so only --local-addr can make node 0 advertise it. Rank 0 hosts the store (--worker-store
  // torch), so the address node 0 advertises is the workers' MASTER_ADDR.
  auto a = start_node(port, 2, 1, "echo store=$MASTER_ADDR",
                      {"--node-rank", "0", "--local-addr", "127.0.0.2", "--worker-store", "torch"});
  auto b = start_node(port, 2, 1, "echo store=$MASTER_ADDR",
                      {"--node-rank", "1", "--worker-store", "torch"});
  const auto done = NpuRunProcess::wait_all({a.get(), b.get()}, 20s);
  const Finished& fa = done[0];
  const Finished& fb = done[1];
  INFO(fa.err << "\n----\n" << fb.err);
  CHECK(fa.exit_code == 0);
  CHECK(fb.exit_code == 0);
  CHECK(fa.out == "store=127.0.0.2\n");
  CHECK(fb.out == "store=127.0.0.2\n");
}

TEST_CASE("multi-node: while waiting, progress names the missing node ranks",
          "[integration][multi-node]") {
  const int port = unused_port();
  // The server reports progress every 5 s; the round never forms and times out after 6 s.
  const Finished f =
      run_npu_run({"--nnodes", "3", "--node-rank", "0", "--master-port", std::to_string(port),
                   "--rdzv-timeout", "6", "--no-python", "/bin/true"});
  CHECK(f.exit_code == 125);
  CHECK_THAT(f.err, Contains("joined 1/3, waiting for node ranks 1, 2"));
  CHECK_THAT(f.err, Contains("only 1 of 3 nodes joined within 6 s; still missing node ranks 1, 2"));
}

TEST_CASE("multi-node: a port that is bound but never served is named, with the fix",
          "[integration][multi-node]") {
  asio::io_context io;
  // Bound without SO_REUSEADDR and never listening: nobody can serve the rendezvous there.
  asio::ip::tcp::socket squatter(io);
  squatter.open(asio::ip::tcp::v4());
  squatter.bind({asio::ip::make_address("127.0.0.1"), 0});
  const int port = squatter.local_endpoint().port();
  const Finished f =
      run_npu_run({"--nnodes", "2", "--node-rank", "0", "--master-port", std::to_string(port),
                   "--rdzv-timeout", "2", "--no-python", "/bin/true"});
  CHECK(f.exit_code == 125);
  CHECK_THAT(
      f.err,
      Contains(
          "the port is in use, but nothing accepts connections there; free it or choose another "
          "--master-port"));
  CHECK_THAT(f.err,
             Contains("cannot reach the rendezvous server at 127.0.0.1:" + std::to_string(port)));
}

TEST_CASE("multi-node: a node that finishes first waits for the job's result",
          "[integration][multi-node]") {
  // Exit barrier: node 1 is done at once, node 0's worker fails a second later; node 1 must not
  // leave with 0 before the job's result is known.
  const int port = unused_port();
  const std::string script = "if [ $GROUP_RANK = 0 ]; then sleep 1; exit 3; fi; exit 0";
  auto a = start_node(port, 2, 1, script, {"--node-rank", "0"});
  auto b = start_node(port, 2, 1, script, {"--node-rank", "1"});
  const auto done = NpuRunProcess::wait_all({a.get(), b.get()}, 20s);
  INFO(done[0].err << "\n----\n" << done[1].err);
  CHECK(done[0].exit_code == 3);
  CHECK(done[1].exit_code == 3);
  CHECK(done[1].seconds >= 0.9);
  require_no_strays(*a);
  require_no_strays(*b);
}

TEST_CASE("multi-node: the server leaves after --exit-barrier-timeout if an agent never does",
          "[integration][multi-node]") {
  // Node 1 reports success, then freezes before it can hear the result: node 0 must not wait
  // for it longer than --exit-barrier-timeout (default 300 s). Heartbeats stay slow so that the
  // freeze is not noticed as a lost node first.
  const int port = unused_port();
  auto node = [&](const std::string& rank, const std::string& script) {
    return std::make_unique<NpuRunProcess>(std::vector<std::string>{
        "--nnodes", "2", "--node-rank", rank, "--master-port", std::to_string(port),
        "--exit-barrier-timeout", "1", "--no-python", "/bin/sh", "-c", script});
  };
  const std::string script = "echo ready; if [ $GROUP_RANK = 0 ]; then sleep 1.5; fi; exit 0";
  auto a = node("0", script);
  auto b = node("1", script);
  a->wait_for_output("ready", 1, 20s);
  b->wait_for_output("waiting for the job's result", 1, 20s, true);  // node 1 has reported
  b->send_signal(SIGSTOP);
  const Finished f = a->wait(20s);
  INFO(f.err);
  CHECK(f.exit_code == 0);
  CHECK(f.seconds < 10);
  CHECK_THAT(f.err, Contains("still connected 1 s after the job ended"));
  b->send_signal(SIGCONT);
  b->wait(20s);
  require_no_strays(*a);
  require_no_strays(*b);
}

namespace {

// "Max open files  <soft>  <hard>  files" of a running process.
std::pair<std::string, std::string> open_files_limit(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/limits");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("Max open files", 0) != 0) continue;
    std::istringstream fields(line.substr(14));
    std::string soft, hard;
    fields >> soft >> hard;
    return {soft, hard};
  }
  return {};
}

// Starts the processes of `start` with a soft open-files limit of 256, as a login shell's may be.
template <typename Start>
auto with_low_open_files_limit(Start start) {
  rlimit saved{};
  REQUIRE(::getrlimit(RLIMIT_NOFILE, &saved) == 0);
  rlimit low = saved;
  low.rlim_cur = 256;
  REQUIRE(::setrlimit(RLIMIT_NOFILE, &low) == 0);
  auto started = start();
  REQUIRE(::setrlimit(RLIMIT_NOFILE, &saved) == 0);
  return started;
}

}  // namespace

TEST_CASE("multi-node: rdzv-server and node 0's agent raise their open-files limit to the hard one",
          "[integration][multi-node]") {
  const int port = unused_port();
  auto server = with_low_open_files_limit([&] {
    return std::make_unique<NpuRunProcess>(std::vector<std::string>{
        "rdzv-server", "--port", std::to_string(port), "--nnodes", "2", "--host", "127.0.0.1"});
  });
  server->wait_for_output("rendezvous server on 127.0.0.1", 1, 10s, true);
  const auto [server_soft, server_hard] = open_files_limit(server->pid());
  CHECK(server_soft != "256");
  CHECK(server_soft == server_hard);
  server->send_signal(SIGTERM);
  server->wait(10s);

  const int agent_port = unused_port();
  auto node0 = with_low_open_files_limit([&] {
    return start_node(agent_port, 2, 1, "echo hi", {"--node-rank", "0"});
  });
  node0->wait_for_output("rendezvous server on", 1, 10s, true);
  const auto [agent_soft, agent_hard] = open_files_limit(node0->pid());
  CHECK(agent_soft != "256");
  CHECK(agent_soft == agent_hard);
  node0->send_signal(SIGTERM);
  node0->wait(10s);
  require_no_strays(*node0);
}

}  // namespace test_multi_node_rendezvous
