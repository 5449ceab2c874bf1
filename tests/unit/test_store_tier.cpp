// Tiered mode in one process: node 0's store (StoreServer) and a node's proxy (StoreProxy) on a
// background io thread, with blocking test clients of both torch generations on loopback. The
// proxy must be invisible to its clients (torch's answers), hold one connection to node 0, and
// coalesce waits and adds.
#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>
#include <catch2/catch.hpp>
#include <cstring>
#include <future>
#include <map>
#include <thread>

#include "store/store_proxy.hpp"
#include "store/store_server.hpp"

namespace test_store_tier {

using namespace npu_run::store;
namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using namespace std::chrono_literals;

namespace {

const auto kLoopback = asio::ip::make_address("127.0.0.1");

// Node 0's store and one node's proxy attached to it, served by a thread of their own.
struct Tier {
  asio::io_context io;
  StoreServer root{io};
  StoreProxy proxy{io};
  tcp::acceptor root_port{io, tcp::endpoint(kLoopback, 0)};
  tcp::acceptor proxy_port{io, tcp::endpoint(kLoopback, 0)};
  // Read before the io thread starts: the acceptors are that thread's from then on.
  const int root_port_number = root_port.local_endpoint().port();
  const int proxy_port_number = proxy_port.local_endpoint().port();
  std::thread thread;

  Tier() {
    root.listen_for_local_clients(root_port);
    proxy.listen_for_local_clients(proxy_port);
    tcp::socket upstream(io);
    upstream.connect(root_port.local_endpoint());
    proxy.attach_upstream(std::move(upstream));
    thread = std::thread([this] {
      auto guard = asio::make_work_guard(io);
      io.run();
    });
  }
  // Runs `f` on the io thread and returns what it returns.
  template <typename F>
  auto on_io(F f) {
    std::packaged_task<decltype(f())()> task(std::move(f));
    auto result = task.get_future();
    asio::post(io, [&task] { task(); });
    return result.get();
  }
  ~Tier() {
    on_io([this] {
      proxy.reset();
      root.stop();
      return 0;
    });
    io.stop();
    thread.join();
  }
  size_t root_connections() {
    return on_io([this] { return root.connections(); });
  }
  ProxyCounters counters() {
    return on_io([this] { return proxy.counters(); });
  }
};

// A blocking torch-like client (one request, then its answer).
struct Client {
  asio::io_context io;
  tcp::socket socket{io};
  Generation generation;

  Client(int port, Generation g) : generation(g) {
    socket.connect(tcp::endpoint(kLoopback, static_cast<unsigned short>(port)));
    if (g == Generation::kTorch2) send({Command::kValidate, {}, {}, 0, kValidationMagic});
  }
  void send(const Request& r) { asio::write(socket, asio::buffer(encode_request(generation, r))); }
  std::string read(size_t n) {
    std::string bytes(n, '\0');
    asio::read(socket, asio::buffer(bytes));
    return bytes;
  }
  template <typename T>
  T read_number() {
    T value{};
    const std::string bytes = read(sizeof value);
    std::memcpy(&value, bytes.data(), sizeof value);
    return value;
  }
  std::string read_bytes() { return read(read_number<uint64_t>()); }

  void set(const std::string& k, const std::string& v) { send({Command::kSet, {k}, {v}}); }
  std::string get(const std::string& k) {
    send({Command::kGet, {k}, {}});
    return read_bytes();
  }
  int64_t add(const std::string& k, int64_t d) {
    send({Command::kAdd, {k}, {}, d});
    return read_number<int64_t>();
  }
  std::string compare_set(const std::string& k, const std::string& expected,
                          const std::string& desired) {
    send({Command::kCompareSet, {k}, {expected, desired}});
    return read_bytes();
  }
  int64_t num_keys() {
    send({Command::kNumKeys, {}, {}});
    return read_number<int64_t>();
  }
  int64_t delete_key(const std::string& k) {
    send({Command::kDeleteKey, {k}, {}});
    return read_number<int64_t>();
  }
  uint8_t check(const std::vector<std::string>& keys) {
    send({Command::kCheck, keys, {}});
    return read_number<uint8_t>();
  }
  void wait(const std::vector<std::string>& keys) {
    send({Command::kWait, keys, {}});
    CHECK(read_number<uint8_t>() == static_cast<uint8_t>(WaitReply::kStopWaiting));
  }
  // True when the other end closed the connection (within 5 s).
  bool closed() {
    socket.non_blocking(false);
    timeval tv{5, 0};
    ::setsockopt(socket.native_handle(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    char byte = 0;
    boost::system::error_code ec;
    socket.read_some(asio::buffer(&byte, 1), ec);
    return ec == asio::error::eof || ec == asio::error::connection_reset;
  }
};

}  // namespace

TEST_CASE("store tier: both torch generations through a proxy get torch's answers",
          "[unit][store][tier]") {
  Tier tier;
  for (const Generation g : {Generation::kTorch1, Generation::kTorch2}) {
    const std::string p = g == Generation::kTorch1 ? "one/" : "two/";
    Client c(tier.proxy_port_number, g);
    c.set(p + "a", "1");
    CHECK(c.get(p + "a") == "1");
    CHECK(c.add(p + "n", 5) == 5);
    CHECK(c.add(p + "n", -7) == -2);
    CHECK(c.get(p + "n") == "-2");
    CHECK(c.compare_set(p + "cs", "x", "y") == "x");  // missing key: the expected value
    c.set(p + "cs", "v");
    CHECK(c.compare_set(p + "cs", "v", "w") == "w");
    const int64_t before = c.num_keys();
    c.set(p + "k", "v");
    CHECK(c.num_keys() == before + 1);
    CHECK(c.delete_key(p + "k") == 1);
    CHECK(c.delete_key(p + "k") == 0);
    CHECK(c.check({p + "a"}) == static_cast<uint8_t>(CheckReply::kReady));
    CHECK(c.check({p + "a", p + "absent"}) == static_cast<uint8_t>(CheckReply::kNotReady));
    c.wait({p + "a"});  // present: answered at once
    if (g == Generation::kTorch2) {
      c.send({Command::kPing, {}, {}, 0, 77});
      CHECK(c.read_number<uint32_t>() == 77);
      c.send({Command::kAppend, {p + "a"}, {"2"}});
      c.send({Command::kMultiSet, {p + "m1", p + "m2"}, {"x", "y"}});
      c.send({Command::kMultiGet, {p + "m2", p + "a", p + "m1"}, {}});
      CHECK(c.read_bytes() == "y");
      CHECK(c.read_bytes() == "12");
      CHECK(c.read_bytes() == "x");
    }
  }
  // What the proxy wrote is node 0's, seen by a client of node 0 directly.
  Client direct(tier.root_port_number, Generation::kTorch2);
  CHECK(direct.get("one/n") == "-2");
  // Node 0 saw one connection for the node's clients: the proxy's (and now this one).
  CHECK(tier.root_connections() == 2);
}

TEST_CASE("store tier: waits on the same keys are one upstream wait, woken by a write elsewhere",
          "[unit][store][tier]") {
  Tier tier;
  std::vector<std::unique_ptr<Client>> waiters;
  for (int i = 0; i < 8; ++i) {
    waiters.push_back(std::make_unique<Client>(tier.proxy_port_number,
                                               i % 2 ? Generation::kTorch2 : Generation::kTorch1));
    waiters.back()->send({Command::kWait, {"gate", "door"}, {}});
  }
  // Every wait is parked before the write (7 joined the first one).
  for (int i = 0; i < 500 && tier.counters().coalesced_waits < 7; ++i)
    std::this_thread::sleep_for(10ms);
  CHECK(tier.counters().coalesced_waits == 7);
  Client writer(tier.root_port_number, Generation::kTorch2);
  writer.set("gate", "open");
  writer.set("door", "open");
  for (auto& w : waiters)
    CHECK(w->read_number<uint8_t>() == static_cast<uint8_t>(WaitReply::kStopWaiting));
  // Still in step afterwards.
  CHECK(waiters[3]->get("door") == "open");
  // A 2.x client that gives up: its cancel is answered, and the others' wait is unaffected.
  Client patient(tier.proxy_port_number, Generation::kTorch2);
  Client impatient(tier.proxy_port_number, Generation::kTorch2);
  patient.send({Command::kWait, {"later"}, {}});
  impatient.send({Command::kWait, {"later"}, {}});
  // Both parked (the second joined the first) before one gives up.
  for (int i = 0; i < 500 && tier.counters().coalesced_waits < 8; ++i)
    std::this_thread::sleep_for(10ms);
  REQUIRE(tier.counters().coalesced_waits == 8);
  impatient.send({Command::kCancelWait, {}, {}});
  CHECK(impatient.read_number<uint8_t>() == static_cast<uint8_t>(WaitReply::kWaitCanceled));
  writer.set("later", "now");
  CHECK(patient.read_number<uint8_t>() == static_cast<uint8_t>(WaitReply::kStopWaiting));
  CHECK(impatient.get("later") == "now");
}

TEST_CASE("store tier: concurrent adds are batched and answered as if one after another",
          "[unit][store][tier]") {
  Tier tier;
  constexpr int kClients = 16;
  std::vector<std::unique_ptr<Client>> clients;
  for (int i = 0; i < kClients; ++i)
    clients.push_back(std::make_unique<Client>(tier.proxy_port_number, Generation::kTorch2));
  int64_t total = 0;
  for (int round = 0; round < 20; ++round) {
    for (int i = 0; i < kClients; ++i) clients[i]->send({Command::kAdd, {"count"}, {}, i + 1});
    std::map<int64_t, int64_t> delta_of;  // result -> the delta that gave it
    for (int i = 0; i < kClients; ++i) {
      const auto result = clients[i]->read_number<int64_t>();
      CHECK(delta_of.emplace(result, i + 1).second);  // no two adds saw the same total
    }
    // One after another: every result less its delta is the total before it.
    total += kClients * (kClients + 1) / 2;
    int64_t at = total;
    while (!delta_of.empty()) {
      const auto last = delta_of.find(at);
      REQUIRE(last != delta_of.end());
      at -= last->second;
      delta_of.erase(last);
    }
    CHECK(at == total - kClients * (kClients + 1) / 2);
  }
  CHECK(clients[0]->get("count") == std::to_string(total));
  const ProxyCounters counted = tier.counters();
  CHECK(counted.batched_adds > 0);
  INFO("upstream " << counted.upstream_requests << " for " << counted.client_requests);
  CHECK(counted.upstream_requests < counted.client_requests);
}

TEST_CASE("store tier: a refused request costs its client only, a lost upstream every client",
          "[unit][store][tier]") {
  auto tier = std::make_unique<Tier>();
  Client bad(tier->proxy_port_number, Generation::kTorch1);
  Client good(tier->proxy_port_number, Generation::kTorch2);
  bad.set("word", "abc");
  bad.send({Command::kAdd, {"word"}, {}, 1});
  CHECK(bad.closed());
  CHECK(good.get("word") == "abc");  // the proxy and its upstream carry on
  CHECK(tier->root_connections() == 1);
  // Node 0's store goes: the node's clients are closed, not left waiting.
  good.send({Command::kWait, {"never"}, {}});
  tier->on_io([&] {
    tier->root.stop();
    return 0;
  });
  CHECK(good.closed());
  Client late(tier->proxy_port_number, Generation::kTorch2);
  CHECK(late.closed());  // until the next round
}

TEST_CASE("store tier: a client's unanswered requests are bounded in number and bytes",
          "[unit][store][tier]") {
  // A proxy whose upstream has not come yet: everything its clients send waits.
  asio::io_context io;
  StoreProxy proxy(io);
  tcp::acceptor port(io, tcp::endpoint(kLoopback, 0));
  proxy.listen_for_local_clients(port);
  const int number = port.local_endpoint().port();
  std::thread thread([&io] {
    auto guard = asio::make_work_guard(io);
    io.run();
  });
  Client patient(number, Generation::kTorch1);
  patient.send({Command::kNumKeys, {}, {}});  // one request waiting is fine
  Client pipeliner(number, Generation::kTorch1);
  std::string many;
  for (int i = 0; i < 1025; ++i)
    many += encode_request(Generation::kTorch1, {Command::kNumKeys, {}, {}});
  asio::write(pipeliner.socket, asio::buffer(many));
  CHECK(pipeliner.closed());
  Client hoarder(number, Generation::kTorch2);
  const std::string value(40 << 20, 'v');  // two of these pass the 80 MiB of one request
  hoarder.set("/a", value);
  hoarder.set("/b", value);
  CHECK(hoarder.closed());
  std::promise<size_t> left;
  asio::post(io, [&] { left.set_value(proxy.connections()); });
  CHECK(left.get_future().get() == 1);  // the patient one
  io.stop();
  thread.join();
}

}  // namespace test_store_tier
