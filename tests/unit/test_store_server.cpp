// The store server's connection rules over real loopback sockets: a connection that never
// speaks is closed after the silent timeout, one that spoke stays however idle it then is.
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>
#include <catch2/catch.hpp>

#include "store/store_server.hpp"
#include "support/run_until.hpp"

namespace test_store_server {

using namespace npu_run::store;
using npu_run::testing::run_until;
namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using namespace std::chrono_literals;

namespace {

// True once the peer closed `socket` (a read sees the end), within the io's turns.
bool closed_by_peer(tcp::socket& socket) {
  socket.non_blocking(true);
  char byte = 0;
  boost::system::error_code ec;
  socket.read_some(asio::buffer(&byte, 1), ec);
  return ec == asio::error::eof || ec == asio::error::connection_reset;
}

}  // namespace

TEST_CASE("store server: a connection silent past the timeout is closed and one that spoke stays",
          "[unit][store]") {
  asio::io_context io;
  StoreServerOptions options;
  // Long enough that both connections are seen open first, even on a loaded machine.
  options.silent_timeout = 1s;
  StoreServer server(io, options);
  tcp::acceptor acceptor(io, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
  server.listen_for_local_clients(acceptor);
  tcp::socket silent(io);
  tcp::socket speaking(io);
  silent.connect(acceptor.local_endpoint());
  speaking.connect(acceptor.local_endpoint());
  Request validate{Command::kValidate, {}, {}, 0, kValidationMagic};
  asio::write(speaking, asio::buffer(encode_request(Generation::kTorch2, validate)));
  REQUIRE(run_until(
      io, [&] { return server.connections() == 2; }, 2s));
  CHECK(run_until(
      io, [&] { return server.connections() == 1; }, 5s));
  CHECK(closed_by_peer(silent));
  // Well past the timeout, the one that spoke is still served: a ping is answered.
  run_until(
      io, [] { return false; }, 500ms);
  Request ping{Command::kPing, {}, {}, 0, 0xABCD1234};
  asio::write(speaking, asio::buffer(encode_request(Generation::kTorch2, ping)));
  uint32_t echoed = 0;
  speaking.non_blocking(true);
  REQUIRE(run_until(
      io,
      [&] {
        boost::system::error_code ec;
        return speaking.read_some(asio::buffer(&echoed, 4), ec) == 4;
      },
      2s));
  CHECK(echoed == 0xABCD1234);
  CHECK(server.connections() == 1);
}

}  // namespace test_store_server
