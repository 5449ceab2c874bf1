// A rendezvous session outlives its connection: an agent whose link falls silent resumes on a
// new connection, and neither side loses or repeats a message. The clients run in this process
// behind a proxy that can freeze the connections it carries (as a partition, or TCP backing off,
// does to an established connection) while new ones get through; the refusals are checked with
// raw connections.
#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>
#include <catch2/catch.hpp>
#include <thread>

#include "rendezvous/client/client.hpp"
#include "rendezvous/protocol/protocol.hpp"
#include "rendezvous/server/server.hpp"
#include "support/loopback_rdzv.hpp"
#include "support/raw_peer.hpp"

namespace test_rdzv_resume {

using namespace npu_run::rdzv;
using namespace npu_run::testing;
namespace asio = boost::asio;
using tcp = asio::ip::tcp;

namespace {

JobSettings two_nodes() {
  JobSettings s;
  s.run_id = "it";
  s.min_nodes = s.max_nodes = 2;
  s.heartbeat_interval = 100ms;
  s.heartbeat_timeout = 3s;
  s.progress_interval = 200ms;  // sequenced messages while a round waits for its nodes
  return s;
}

Hello hello(const std::string& session) {
  return Hello{kMagic, kProtocolVersion, "it", "", session};
}

// Forwards connections to the server. freeze_existing() stops every connection it carries for
// good, both ways, without closing it (bytes in flight are lost, as in a partition); connections
// made afterwards are forwarded normally.
class FreezingProxy {
 public:
  FreezingProxy(asio::io_context& io, int server_port)
      : io_(io),
        acceptor_(io, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0)),
        server_(asio::ip::make_address("127.0.0.1"), static_cast<unsigned short>(server_port)) {
    accept();
  }
  int port() const { return acceptor_.local_endpoint().port(); }
  int connections() const { return accepted_; }
  void freeze_existing() {
    for (auto& pipe : pipes_) pipe->frozen = true;
  }

 private:
  struct Pipe {
    explicit Pipe(tcp::socket c, asio::io_context& io) : client(std::move(c)), server(io) {}
    tcp::socket client;
    tcp::socket server;
    std::array<char, 4096> up{};
    std::array<char, 4096> down{};
    bool frozen = false;
  };

  void accept() {
    acceptor_.async_accept([this](boost::system::error_code ec, tcp::socket socket) {
      if (ec) return;
      ++accepted_;
      auto pipe = std::make_shared<Pipe>(std::move(socket), io_);
      pipes_.push_back(pipe);
      pipe->server.async_connect(server_, [pipe](boost::system::error_code connect_ec) {
        if (connect_ec) return;
        pump(pipe, pipe->client, pipe->server, pipe->up);
        pump(pipe, pipe->server, pipe->client, pipe->down);
      });
      accept();
    });
  }

  static void pump(const std::shared_ptr<Pipe>& pipe, tcp::socket& from, tcp::socket& to,
                   std::array<char, 4096>& buffer) {
    from.async_read_some(asio::buffer(buffer), [pipe, &from, &to, &buffer](
                                                   boost::system::error_code ec, size_t n) {
      if (pipe->frozen) return;
      if (ec) {  // one side hung up: so does the other
        close(*pipe);
        return;
      }
      asio::async_write(to, asio::buffer(buffer, n),
                        [pipe, &from, &to, &buffer](boost::system::error_code write_ec, size_t) {
                          if (pipe->frozen) return;
                          if (write_ec)
                            close(*pipe);
                          else
                            pump(pipe, from, to, buffer);
                        });
    });
  }

  static void close(Pipe& pipe) {
    boost::system::error_code ignored;
    pipe.client.close(ignored);
    pipe.server.close(ignored);
  }

  asio::io_context& io_;
  tcp::acceptor acceptor_;
  tcp::endpoint server_;
  std::vector<std::shared_ptr<Pipe>> pipes_;
  int accepted_ = 0;
};

// An agent that joins, reports success for its assignment and records the decision; `on_assigned`
// runs before its report is sent.
struct Agent {
  Agent(asio::io_context& io, int port, std::string host)
      : client(io, ClientOptions{"127.0.0.1", port, 10s, 10s, hello(""), ""}),
        host_name(std::move(host)) {}

  void start() {
    client.start(RendezvousClient::Handlers{
        [this](const std::string&) { client.send(loopback_join(host_name)); },
        [this](const ServerMessage& m) {
          if (const auto* p = std::get_if<Progress>(&m)) {
            joined_seen = p->joined;
          } else if (const auto* a = std::get_if<Assigned>(&m)) {
            ++assigned;
            if (on_assigned) on_assigned();
            client.send(Report{a->round, Outcome::kSucceeded, std::nullopt, 0});
          } else if (const auto* d = std::get_if<Decision>(&m)) {
            decision = *d;
            client.close();
          }
        },
        [this](const std::string& why) { failure = why; }});
  }

  RendezvousClient client;
  std::string host_name;
  std::function<void()> on_assigned;
  int joined_seen = 0;  // from the server's last progress message
  int assigned = 0;
  std::optional<Decision> decision;
  std::string failure;
};

// The server on its own thread, for raw connections that block. Nothing of it is touched from
// the test's thread once that thread runs.
struct ServerThread {
  explicit ServerThread(const JobSettings& settings)
      : server(std::make_unique<RendezvousServer>(io, settings, loopback_server())),
        port(server->port()) {
    server->start([](const Decision&) {});
    thread = std::thread([this] { io.run(); });
  }
  ~ServerThread() {
    io.stop();
    thread.join();
  }
  ServerThread(const ServerThread&) = delete;
  ServerThread& operator=(const ServerThread&) = delete;

  asio::io_context io;
  std::unique_ptr<RendezvousServer> server;
  const int port;
  std::thread thread;
};

// Runs `io` until `finished` says so, for at most 10 s.
void run_until(asio::io_context& io, const std::function<bool()>& finished) {
  const auto deadline = std::chrono::steady_clock::now() + 10s;
  while (!finished() && std::chrono::steady_clock::now() < deadline) io.run_one_for(100ms);
}

template <typename T>
const T* next_of(Raw& raw) {
  static std::optional<ServerMessage> last;
  last = raw.reply();
  return last ? std::get_if<T>(&*last) : nullptr;
}

// A new connection that said hello, naming `session`, and was welcomed.
Raw welcomed(int port, const std::string& session) {
  Raw raw(port);
  REQUIRE(raw.send(hello(session)));
  REQUIRE(next_of<Welcome>(raw) != nullptr);
  return raw;
}

// A two-node job on one io_context: agent `behind` reaches the server through a proxy that can
// freeze its link, agent `direct` does not.
struct FrozenLinkJob {
  asio::io_context io;
  RendezvousServer server{io, two_nodes(), loopback_server()};
  std::optional<Decision> done;
  FreezingProxy proxy{io, server.port()};
  Agent behind{io, proxy.port(), "host-a"};
  Agent direct{io, server.port(), "host-b"};

  FrozenLinkJob() {
    server.start([this](const Decision& d) { done = d; });
  }
  // Runs until the server and both agents have the decision; the job must have ended 0.
  void finish() {
    run_until(io, [&] { return done && behind.decision && direct.decision; });
    INFO(behind.failure << direct.failure);
    REQUIRE(done);
    CHECK(done->exit_code == 0);
  }
};

}  // namespace

TEST_CASE("rdzv resume: a report lost on a frozen link is sent again on a new connection",
          "[integration][rdzv-resume]") {
  FrozenLinkJob job;
  std::optional<Decision>& done = job.done;
  FreezingProxy& proxy = job.proxy;
  Agent& behind = job.behind;
  Agent& direct = job.direct;
  // The link freezes just before the report is written to it: only a resume can deliver it.
  behind.on_assigned = [&] { proxy.freeze_existing(); };
  behind.start();
  direct.start();
  job.finish();
  CHECK(done->action == Action::kFinish);
  REQUIRE(behind.decision);
  REQUIRE(direct.decision);
  CHECK(behind.decision->exit_code == 0);
  CHECK(behind.assigned == 1);  // nothing repeated
  CHECK(proxy.connections() == 2);
  CHECK(behind.failure.empty());
}

TEST_CASE("rdzv resume: an assignment sent into a frozen link reaches the agent after its resume",
          "[integration][rdzv-resume]") {
  FrozenLinkJob job;
  asio::io_context& io = job.io;
  FreezingProxy& proxy = job.proxy;
  Agent& behind = job.behind;
  Agent& direct = job.direct;
  behind.start();
  // Once the first agent has joined, its link freezes; the second agent's join completes the
  // round, and the assignment the server sends the first is lost with the frozen link.
  run_until(io, [&] { return behind.joined_seen == 1; });  // its join has arrived
  REQUIRE(behind.joined_seen == 1);
  proxy.freeze_existing();
  direct.start();
  job.finish();
  REQUIRE(behind.decision);
  CHECK(behind.assigned == 1);
  CHECK(proxy.connections() == 2);
}

TEST_CASE("rdzv resume: the server resends what the agent missed and refuses what it cannot resume",
          "[integration][rdzv-resume]") {
  ServerThread s(two_nodes());
  const int port = s.port;
  Raw first = welcomed(port, "key-a");
  REQUIRE(first.send(loopback_join("host-a")));
  const auto* progress = next_of<Progress>(first);  // sequenced message 1
  REQUIRE(progress != nullptr);
  CHECK(progress->joined == 1);

  SECTION("a resume from a new connection takes the session over") {
    Raw second = welcomed(port, "key-b");
    REQUIRE(second.send(Resume{"key-a", 0}));
    const auto* resumed = next_of<Resumed>(second);
    REQUIRE(resumed != nullptr);
    CHECK(resumed->received == 1);  // the join
    const auto* again = next_of<Progress>(second);
    REQUIRE(again != nullptr);
    CHECK(again->joined == 1);
    CHECK(first.closed_within(2s));  // the old connection is given up
    // The session's heartbeats now come from here; one that confirms more than was sent is
    // a protocol error.
    REQUIRE(second.send(Heartbeat{1}));
    const auto* ack = next_of<HeartbeatAck>(second);
    REQUIRE(ack != nullptr);
    CHECK(ack->received == 1);
    REQUIRE(second.send(Heartbeat{7}));
    CHECK(second.error_code() == "bad_message");
  }
  SECTION("a resume that claims more than was sent") {
    Raw second = welcomed(port, "");
    REQUIRE(second.send(Resume{"key-a", 5}));
    CHECK(second.error_code() == "cannot_resume");
  }
  SECTION("a session nobody has") {
    Raw second = welcomed(port, "");
    REQUIRE(second.send(Resume{"key-z", 0}));
    CHECK(second.error_code() == "unknown_session");
  }
  SECTION("a resume before the welcome") {
    Raw second(port);
    REQUIRE(second.send(Resume{"key-a", 0}));
    CHECK(second.error_code() == "protocol_order");
  }
  SECTION("a resume by the session's own connection") {
    REQUIRE(first.send(Resume{"key-a", 0}));
    CHECK(first.error_code() == "protocol_order");
  }
}

}  // namespace test_rdzv_resume
