// A node's proxy in the agent (agent/node_store_proxy): when node 0 closes the proxy's upstream
// before answering its greeting, as node 0 does to a connection silent past its timeout when an
// overflowing accept queue delayed the greeting, nothing went through it: the proxy dials
// again, and its workers, waiting meanwhile, get their answers.
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>
#include <catch2/catch.hpp>
#include <cstring>
#include <future>
#include <thread>

#include "agent/link/node_store_proxy.hpp"
#include "store/store_server.hpp"

namespace test_node_store_proxy {

using namespace npu_run;
using namespace npu_run::store;
namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using namespace std::chrono_literals;

namespace {

const auto kLoopback = asio::ip::make_address("127.0.0.1");

// Node 0 on one port: closes its first `turn_away` connections unread, serves the rest.
struct FickleRoot {
  asio::io_context& io;
  StoreServer store;
  tcp::acceptor port;
  int turn_away;
  int turned_away = 0;

  FickleRoot(asio::io_context& io_context, int turn_away_first)
      : io(io_context),
        store(io_context),
        port(io_context, tcp::endpoint(kLoopback, 0)),
        turn_away(turn_away_first) {
    port.listen();
    accept();
  }
  void accept() {
    port.async_accept([this](boost::system::error_code ec, tcp::socket socket) {
      if (ec) return;
      if (turned_away < turn_away) {
        ++turned_away;
        socket.close();
      } else {
        store.adopt(std::move(socket));
      }
      accept();
    });
  }
};

int64_t read_i64(tcp::socket& socket) {
  int64_t value = 0;
  asio::read(socket, asio::buffer(&value, sizeof value));
  return value;
}

}  // namespace

TEST_CASE(
    "node store proxy: an upstream closed before node 0 took it is dialled again and loses nothing",
    "[unit][store][tier]") {
  asio::io_context io;
  FickleRoot root(io, 2);
  tcp::acceptor worker_port(io, tcp::endpoint(kLoopback, 0));
  const auto worker_endpoint = worker_port.local_endpoint();
  NodeStoreProxy proxy(io, worker_port, "127.0.0.1", root.port.local_endpoint().port(), 20s);
  proxy.new_round();
  std::thread thread([&io] {
    auto guard = asio::make_work_guard(io);
    io.run();
  });

  // A torch 1.13 worker adds twice; its requests wait for an upstream node 0 takes.
  asio::io_context client_io;
  tcp::socket worker(client_io);
  worker.connect(worker_endpoint);
  const std::string add = encode_request(Generation::kTorch1, {Command::kAdd, {"/n"}, {}, 5});
  asio::write(worker, asio::buffer(add + add));
  CHECK(read_i64(worker) == 5);
  CHECK(read_i64(worker) == 10);  // each add applied once

  std::promise<std::pair<int, uint64_t>> seen;
  asio::post(io, [&] {
    seen.set_value({root.turned_away, proxy.proxy().counters().upstream_requests});
  });
  const auto [turned_away, forwarded] = seen.get_future().get();
  CHECK(turned_away == 2);
  CHECK(forwarded == 2);  // one per add: nothing was sent twice
  asio::post(io, [&io] { io.stop(); });
  thread.join();
}

}  // namespace test_node_store_proxy
