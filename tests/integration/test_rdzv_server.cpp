// The Asio rendezvous server with real clients in this process, on 127.0.0.1 port 0.
#include <sys/resource.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <catch2/catch.hpp>
#include <fstream>
#include <set>

#include "rendezvous/client/client.hpp"
#include "rendezvous/protocol/protocol.hpp"
#include "rendezvous/server/server.hpp"
#include "rendezvous/server/server_log.hpp"
#include "support/loopback_rdzv.hpp"

namespace test_rdzv_server {

using namespace npu_run::rdzv;
using npu_run::testing::loopback_server;
using namespace std::chrono_literals;
using Catch::Matchers::Contains;
namespace asio = boost::asio;

namespace {

JobSettings job(int nodes) {
  JobSettings s;
  s.run_id = "it";
  s.min_nodes = s.max_nodes = nodes;
  s.heartbeat_interval = 100ms;
  s.heartbeat_timeout = 2s;
  return s;
}

// An agent reduced to its conversation: join, remember the assignment, report success, record
// the decision.
struct FakeAgent {
  FakeAgent(asio::io_context& io, int port, std::string host, int nproc)
      : client(io, ClientOptions{"127.0.0.1", port, 10s, 10s,
                                 Hello{kMagic, kProtocolVersion, "it", ""}, ""}) {
    node.host = std::move(host);
    node.nproc = nproc;
    for (int i = 0; i < nproc; ++i) node.devices.push_back(i);
    node.worker_port = 40000 + nproc;
  }

  void start() {
    client.start(RendezvousClient::Handlers{
        [this](const std::string& local_addr) {
          node.addr = local_addr;
          Join j;
          j.node = node;
          j.min_nodes = j.max_nodes = nodes;
          client.send(j);
        },
        [this](const ServerMessage& m) {
          if (const auto* a = std::get_if<Assigned>(&m)) {
            assigned = *a;
            client.send(Report{a->round, Outcome::kSucceeded, std::nullopt, 0});
          } else if (const auto* d = std::get_if<Decision>(&m)) {
            decision = *d;
            client.close();
          }
        },
        [this](const std::string& why) { failure = why; }});
  }

  RendezvousClient client;
  NodeInfo node;
  int nodes = 1;
  std::optional<Assigned> assigned;
  std::optional<Decision> decision;
  std::string failure;
};

}  // namespace

TEST_CASE("rdzv server: 8 in-process agents join, run and finish together",
          "[integration][rdzv-server]") {
  asio::io_context io;
  RendezvousServer server(io, job(8), loopback_server());
  REQUIRE(server.port() > 0);
  std::optional<Decision> done;
  server.start([&](const Decision& d) { done = d; });
  std::vector<std::unique_ptr<FakeAgent>> agents;
  for (int i = 0; i < 8; ++i) {
    agents.push_back(
        std::make_unique<FakeAgent>(io, server.port(), "host-" + std::to_string(7 - i), 1 + i % 3));
    agents.back()->nodes = 8;
    agents.back()->start();
  }
  io.run_for(10s);
  REQUIRE(done);
  CHECK(done->exit_code == 0);
  std::set<int> ranks;
  int world = 0;
  for (const auto& a : agents) {
    INFO(a->failure);
    REQUIRE(a->assigned);
    REQUIRE(a->decision);
    ranks.insert(a->assigned->node_rank);
    world += a->node.nproc;
    CHECK(a->decision->exit_code == 0);
  }
  CHECK(ranks.size() == 8);
  for (const auto& a : agents) CHECK(a->assigned->world_size == world);
  // Ranks follow host names: host-0 (the last agent created) is node 0.
  CHECK(agents.back()->assigned->node_rank == 0);
  CHECK(server.connections() == 0);
}

TEST_CASE("rdzv server: garbage from one peer is refused while real agents carry on",
          "[integration][rdzv-server]") {
  asio::io_context io;
  RendezvousServer server(io, job(2), loopback_server());
  std::optional<Decision> done;
  server.start([&](const Decision& d) { done = d; });

  // A stranger sends an HTTP request: its "length" is far beyond the limit. Driven by the same
  // io_context as the server, so nothing here may block.
  asio::ip::tcp::socket stranger(io);
  stranger.connect(
      {asio::ip::make_address("127.0.0.1"), static_cast<unsigned short>(server.port())});
  const std::string request = "GET / HTTP/1.1\r\n\r\n";
  asio::write(stranger, asio::buffer(request));
  std::string reply;
  std::array<char, 4096> buffer{};
  boost::system::error_code end_of_reply;
  std::function<void()> read_reply = [&] {
    stranger.async_read_some(asio::buffer(buffer), [&](boost::system::error_code ec, size_t n) {
      reply.append(buffer.data(), n);
      if (ec)
        end_of_reply = ec;
      else
        read_reply();
    });
  };
  read_reply();

  FakeAgent a(io, server.port(), "a", 1);
  FakeAgent b(io, server.port(), "b", 1);
  a.nodes = b.nodes = 2;
  a.start();
  b.start();
  io.run_for(10s);
  CHECK(end_of_reply == asio::error::eof);  // the server answered, then closed the connection
  CHECK_THAT(reply, Contains("\"ok\":false") && Contains("too_large"));
  REQUIRE(done);
  CHECK(done->exit_code == 0);
  CHECK(a.decision);
  CHECK(b.decision);
}

TEST_CASE("rdzv server: a second server on the same port reports the address in use",
          "[integration][rdzv-server]") {
  asio::io_context io;
  RendezvousServer first(io, job(1), loopback_server());
  ServerOptions same = loopback_server();
  same.port = first.port();
  try {
    RendezvousServer second(io, job(1), same);
    FAIL("a second server bound the same port");
  } catch (const BindError& e) {
    CHECK(e.address_in_use);
    CHECK_THAT(std::string(e.what()), Contains(std::to_string(first.port())));
  }
}

TEST_CASE("rdzv server: a client that never reaches a server names the endpoint and the timeout",
          "[integration][rdzv-server]") {
  asio::io_context io;
  int free_port = 0;
  {
    asio::ip::tcp::acceptor probe(io, {asio::ip::make_address("127.0.0.1"), 0});
    free_port = probe.local_endpoint().port();
  }
  RendezvousClient client(io, ClientOptions{"127.0.0.1", free_port, 1s, 1s,
                                            Hello{kMagic, kProtocolVersion, "it", ""}, ""});
  std::string failure;
  client.start(RendezvousClient::Handlers{[](const std::string&) {}, [](const ServerMessage&) {},
                                          [&](const std::string& why) { failure = why; }});
  io.run_for(5s);
  CHECK_THAT(failure, Contains("127.0.0.1:" + std::to_string(free_port)) &&
                          Contains("within 1 s") && Contains("Connection refused"));
}

TEST_CASE("rdzv server: listens with the kernel's backlog", "[integration][rdzv-server]") {
  asio::io_context io;
  RendezvousServer server(io, job(1), loopback_server());
  std::ifstream somaxconn("/proc/sys/net/core/somaxconn");
  int expected = 0;
  somaxconn >> expected;
  CHECK(server.backlog() == expected);
  ServerOptions small = loopback_server();
  small.backlog = 17;
  CHECK(RendezvousServer(io, job(1), small).backlog() == 17);
}

TEST_CASE("rdzv server: too small kernel queues are named with the sysctl lines that fix them",
          "[integration][rdzv-server]") {
  std::ifstream somaxconn("/proc/sys/net/core/somaxconn");
  long current = 0;
  somaxconn >> current;
  CHECK(kernel_limit_warning(1).empty());
  const std::string warning = kernel_limit_warning(static_cast<int>(current) + 1);
  CHECK_THAT(warning,
             Contains("net.core.somaxconn is " + std::to_string(current)) &&
                 Contains("sysctl -w net.core.somaxconn=65535 net.ipv4.tcp_max_syn_backlog=65535"));
}

}  // namespace test_rdzv_server
