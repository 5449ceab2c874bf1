// A rendezvous server that did not run for longer than the heartbeat timeout (node 0's agent
// SIGSTOPped, or starved of both cores while its workers import torch) blames nobody for the
// silence it measured across its own pause: the agents' heartbeats wait unread in its sockets,
// and the agent in its own process could not send. Here the server and node 0's agent share an
// io_context; another node, a raw peer on its own thread, beats every 50 ms and judges nothing
// (a real agent there would see the server silent past the timeout, and rightly give up). Once
// the round runs, the server's thread sleeps for 1.5 heartbeat timeouts. Before
// net/own_pause.hpp, the tick after the pause declared both nodes lost and the job ended 125
// (seen in CI's etcd spare e2e, with a pause of node 0 just over the timeout).
#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <catch2/catch.hpp>
#include <functional>
#include <optional>
#include <thread>

#include "rendezvous/client/client.hpp"
#include "rendezvous/protocol/protocol.hpp"
#include "rendezvous/server/server.hpp"
#include "support/loopback_rdzv.hpp"
#include "support/raw_peer.hpp"

namespace test_rdzv_own_pause {

using namespace npu_run::rdzv;
using npu_run::testing::loopback_join;
using npu_run::testing::loopback_server;
using npu_run::testing::Raw;
namespace asio = boost::asio;
using namespace std::chrono_literals;

namespace {

JobSettings two_nodes() {
  JobSettings s;
  s.run_id = "pause";
  s.min_nodes = s.max_nodes = 2;
  s.heartbeat_interval = 100ms;
  s.heartbeat_timeout = 1s;
  return s;
}

Hello hello() {
  return Hello{kMagic, kProtocolVersion, "pause", "", ""};
}

// Joins, keeps the round it is assigned, reports success when told; records the decision.
struct Agent {
  Agent(asio::io_context& io, int port, std::string host)
      : client(io, ClientOptions{"127.0.0.1", port, 10s, 10s, hello(), ""}),
        host_name(std::move(host)) {}

  void start() {
    client.start(RendezvousClient::Handlers{
        [this](const std::string&) { client.send(loopback_join(host_name)); },
        [this](const ServerMessage& m) {
          if (const auto* a = std::get_if<Assigned>(&m)) {
            round = a->round;
          } else if (const auto* d = std::get_if<Decision>(&m)) {
            decision = *d;
            client.close();
          }
        },
        [this](const std::string& why) { failure = why; }});
  }
  void report() { client.send(Report{*round, Outcome::kSucceeded, std::nullopt, 0}); }

  RendezvousClient client;
  std::string host_name;
  std::optional<uint64_t> round;
  std::optional<Decision> decision;
  std::string failure;
};

void run_until(asio::io_context& io, const std::function<bool()>& finished,
               std::chrono::milliseconds at_most = 10s) {
  const auto deadline = std::chrono::steady_clock::now() + at_most;
  while (!finished() && std::chrono::steady_clock::now() < deadline) io.run_one_for(50ms);
}

// The other node: joins, beats every 50 ms whatever the server does, reports success once
// `report` is set, and stops at the decision or after 10 s.
struct RawNode {
  explicit RawNode(int port) : thread([this, port] { run(port); }) {}
  ~RawNode() { thread.join(); }
  RawNode(const RawNode&) = delete;
  RawNode& operator=(const RawNode&) = delete;

  void run(int port) {
    Raw raw(port);
    if (!raw.send(hello()) || !raw.reply() || !raw.send(loopback_join("host-1"))) return;
    const auto deadline = std::chrono::steady_clock::now() + 10s;
    std::optional<uint64_t> round;
    while (!decided && std::chrono::steady_clock::now() < deadline) {
      if (!raw.send(Heartbeat{})) return;
      const auto m = raw.reply(50ms);
      if (const auto* a = m ? std::get_if<Assigned>(&*m) : nullptr) round = a->round;
      if (m && std::holds_alternative<Decision>(*m)) decided = true;
      if (m && std::holds_alternative<ErrorReply>(*m)) refused = true;
      assigned = round.has_value();
      if (round && report.exchange(false))
        raw.send(Report{*round, Outcome::kSucceeded, std::nullopt, 0});
    }
  }

  std::atomic<bool> assigned{false};
  std::atomic<bool> report{false};
  std::atomic<bool> decided{false};
  std::atomic<bool> refused{false};
  std::thread thread;  // last: it starts with the members above in place
};

}  // namespace

TEST_CASE("rdzv own pause: a server that did not run judges nobody by that silence",
          "[integration][rdzv-resume]") {
  asio::io_context io;
  RendezvousServer server(io, two_nodes(), loopback_server());
  std::optional<Decision> done;
  server.start([&](const Decision& d) { done = d; });
  Agent local(io, server.port(), "host-0");  // node 0's agent: paused with the server
  local.start();
  RawNode remote(server.port());
  run_until(io, [&] { return local.round && remote.assigned; });
  REQUIRE(local.round);
  REQUIRE(remote.assigned);

  // The server's process stops for one and a half heartbeat timeouts, its agent with it (past
  // the agent's own watchdog too). A wrongful verdict would come at the first tick after the
  // pause, or after the grace of 250 ms.
  std::this_thread::sleep_for(1500ms);
  run_until(
      io, [&] { return done.has_value(); }, 500ms);
  CHECK_FALSE(done);
  local.report();
  remote.report = true;
  run_until(io, [&] { return done && local.decision && remote.decided; });
  INFO("node 0's agent: " << local.failure);
  REQUIRE(done);
  CHECK(done->exit_code == 0);
  CHECK(local.failure.empty());
  CHECK_FALSE(remote.refused);
}

}  // namespace test_rdzv_own_pause
