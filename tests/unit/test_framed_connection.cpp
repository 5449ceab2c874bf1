// The framed connection both ends of the rendezvous use, over a real loopback socket pair: frames
// in pieces, the outgoing byte cap against a peer that never reads, heartbeats that cannot pile
// up, and who hears about a close.
#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>
#include <catch2/catch.hpp>
#include <thread>

#include "net/framed_connection.hpp"

namespace test_framed_connection {

using namespace npu_run::net;
namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using namespace std::chrono_literals;

namespace {

// A connected pair on loopback: `ours` is wrapped in a FramedConnection, `theirs` stays raw.
struct SocketPair {
  explicit SocketPair(asio::io_context& io) : ours(io), theirs(io) {
    tcp::acceptor acceptor(io, tcp::endpoint(asio::ip::make_address("127.0.0.1"), 0));
    theirs.connect(acceptor.local_endpoint());
    acceptor.accept(ours);
  }
  tcp::socket ours;
  tcp::socket theirs;
};

constexpr ConnectionLimits kLimits{1024, 256, size_t{64} * 1024};

std::shared_ptr<const std::string> frame_of(size_t bytes) {
  return std::make_shared<const std::string>(encode_frame(std::string(bytes, 'x')));
}

// Our side of `pair`, started with a small kernel send buffer so that its queue fills soon;
// `theirs` is never read. `closed` gets the reason once the connection ends by itself.
std::shared_ptr<FramedConnection> sending_to_a_peer_that_never_reads(
    SocketPair& pair, std::optional<ConnectionClosed>& closed) {
  pair.ours.set_option(asio::socket_base::send_buffer_size(4096));
  auto connection = FramedConnection::create(std::move(pair.ours), kLimits);
  connection->start({[](std::vector<std::string>&, const std::optional<WireError>&) {},
                     [&closed](const ConnectionClosed& why) { closed = why; }});
  return connection;
}

}  // namespace

TEST_CASE("framed connection: frames split across reads arrive whole and in order", "[unit][net]") {
  asio::io_context io;
  SocketPair pair(io);
  auto connection = FramedConnection::create(std::move(pair.ours), kLimits);
  std::vector<std::string> received;
  connection->start({[&](std::vector<std::string>& frames, const std::optional<WireError>& error) {
                       CHECK_FALSE(error);
                       for (auto& f : frames) received.push_back(f);
                     },
                     [](const ConnectionClosed&) {}});
  const std::string bytes = encode_frame("first") + encode_frame(std::string(600, 'y')) +
                            encode_frame("") + encode_frame("last");
  for (size_t i = 0; i < bytes.size(); i += 7) {
    asio::write(pair.theirs, asio::buffer(bytes.substr(i, 7)));
    io.run_for(1ms);
  }
  io.run_for(50ms);
  REQUIRE(received.size() == 4);
  CHECK(received[0] == "first");
  CHECK(received[1] == std::string(600, 'y'));
  CHECK(received[2].empty());
  CHECK(received[3] == "last");
}

TEST_CASE("framed connection: an oversized frame is refused before its payload is buffered",
          "[unit][net]") {
  asio::io_context io;
  SocketPair pair(io);
  auto connection = FramedConnection::create(std::move(pair.ours), kLimits);
  std::optional<WireError> seen;
  connection->start({[&](std::vector<std::string>&, const std::optional<WireError>& error) {
                       if (error) seen = error;
                     },
                     [](const ConnectionClosed&) {}});
  asio::write(pair.theirs, asio::buffer(std::string("\x00\x00\x04\x01", 4)));  // 1025 > 1024
  io.run_for(50ms);
  REQUIRE(seen);
  CHECK(seen->code == "too_large");
  CHECK_THAT(seen->message,
             Catch::Matchers::Contains("1025") && Catch::Matchers::Contains("limit of 1024"));
}

TEST_CASE("framed connection: a peer that never reads is dropped at the byte cap", "[unit][net]") {
  asio::io_context io;
  SocketPair pair(io);
  std::optional<ConnectionClosed> closed;
  auto connection = sending_to_a_peer_that_never_reads(pair, closed);
  size_t most_queued = 0;
  int sent = 0;
  for (; sent < 100'000 && connection->is_open(); ++sent) {
    connection->send(frame_of(1000));
    most_queued = std::max(most_queued, connection->queued_bytes());
    io.run_for(std::chrono::microseconds(100));
  }
  io.run_for(50ms);
  INFO("frames sent: " << sent);
  REQUIRE(closed);
  CHECK(closed->cause == ConnectionClosed::Cause::kQueueFull);
  CHECK_THAT(closed->text(), Catch::Matchers::Contains("does not read"));
  CHECK(most_queued <= kLimits.max_queued_bytes);
  CHECK(connection->queued_bytes() == 0);  // dropped with the connection
}

TEST_CASE("framed connection: one frame larger than the cap may always wait", "[unit][net]") {
  asio::io_context io;
  SocketPair pair(io);
  auto connection = FramedConnection::create(std::move(pair.ours), kLimits);
  connection->start({[](std::vector<std::string>&, const std::optional<WireError>&) {},
                     [](const ConnectionClosed&) {}});
  CHECK(connection->send(frame_of(size_t{256} * 1024)));  // 4x the cap, into an empty queue
  CHECK(connection->is_open());
  // Read it on a thread while the loop writes it.
  std::string received(4 + size_t{256} * 1024, '\0');
  std::thread reader([&] { asio::read(pair.theirs, asio::buffer(received)); });
  io.run_for(2s);
  reader.join();
  CHECK(received.substr(4) == std::string(size_t{256} * 1024, 'x'));
}

TEST_CASE("framed connection: heartbeats are not queued behind other frames", "[unit][net]") {
  asio::io_context io;
  SocketPair pair(io);
  std::optional<ConnectionClosed> closed;
  auto connection = sending_to_a_peer_that_never_reads(pair, closed);
  // Fill the kernel's buffers until something waits in the queue.
  while (connection->queued_bytes() == 0) {
    connection->send(frame_of(1000));
    io.run_for(std::chrono::microseconds(100));
  }
  const size_t queued = connection->queued_bytes();
  for (int i = 0; i < 100'000; ++i) connection->send_unless_busy(frame_of(10));
  CHECK(connection->queued_bytes() == queued);
  CHECK(connection->is_open());
  CHECK_FALSE(closed);
}

TEST_CASE("framed connection: the owner's close() calls no handler but a peer's close does",
          "[unit][net]") {
  asio::io_context io;
  SocketPair first(io);
  int closed_calls = 0;
  auto ours = FramedConnection::create(std::move(first.ours), kLimits);
  ours->start({[](std::vector<std::string>&, const std::optional<WireError>&) {},
               [&](const ConnectionClosed&) { ++closed_calls; }});
  ours->close();
  io.run_for(50ms);
  CHECK(closed_calls == 0);
  CHECK_FALSE(ours->is_open());

  SocketPair second(io);
  std::optional<ConnectionClosed> why;
  auto theirs_closes = FramedConnection::create(std::move(second.ours), kLimits);
  theirs_closes->start({[](std::vector<std::string>&, const std::optional<WireError>&) {},
                        [&](const ConnectionClosed& w) { why = w; }});
  second.theirs.close();
  io.restart();  // the first connection's end left the loop without work, which stops it
  io.run_for(50ms);
  REQUIRE(why);
  CHECK(why->cause == ConnectionClosed::Cause::kPeerClosed);
}

TEST_CASE("framed connection: close_after_sending delivers what was queued, then reports it",
          "[unit][net]") {
  asio::io_context io;
  SocketPair pair(io);
  std::optional<ConnectionClosed> why;
  auto connection = FramedConnection::create(std::move(pair.ours), kLimits);
  connection->start({[](std::vector<std::string>&, const std::optional<WireError>&) {},
                     [&](const ConnectionClosed& w) { why = w; }});
  connection->send(std::make_shared<const std::string>(encode_frame("bye")));
  connection->close_after_sending();
  CHECK_FALSE(connection->send(frame_of(1)));  // nothing more once closing
  io.run_for(50ms);
  REQUIRE(why);
  CHECK(why->cause == ConnectionClosed::Cause::kSent);
  std::string received;
  boost::system::error_code ec;
  std::array<char, 64> buffer{};
  for (;;) {
    const size_t n = pair.theirs.read_some(asio::buffer(buffer), ec);
    if (ec) break;
    received.append(buffer.data(), n);
  }
  CHECK(received == encode_frame("bye"));
  CHECK(ec == asio::error::eof);
}

}  // namespace test_framed_connection
