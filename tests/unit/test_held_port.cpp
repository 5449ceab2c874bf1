#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <catch2/catch.hpp>

#include "agent/link/rendezvous_settings.hpp"
#include "ascend/hccl_ports.hpp"
#include "basics/usage_error.hpp"
#include "net/held_port.hpp"

namespace test_held_port {

using namespace npu_run;
using Catch::Matchers::Contains;

namespace {

// Binds 0.0.0.0:port, optionally with SO_REUSEADDR and listen(); returns errno or 0.
int try_bind(int port, bool reuse, bool listen_too) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  const int one = 1;
  if (reuse) ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  int err = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0 ? 0 : errno;
  if (err == 0 && listen_too && ::listen(fd, 1) != 0) err = errno;
  ::close(fd);
  return err;
}

}  // namespace

TEST_CASE("held port: others cannot bind it, a SO_REUSEADDR listener (torch's store) can",
          "[port]") {
  boost::asio::io_context io;
  net::HeldPort held(io, {});
  const int port = held.port();
  REQUIRE(port > 0);
  CHECK(try_bind(port, false, false) == EADDRINUSE);
  CHECK(try_bind(port, true, true) == 0);
}

TEST_CASE("held port: avoided ranges are never handed out", "[port]") {
  boost::asio::io_context io;
  // Avoid every port but a narrow window of the ephemeral range is impractical to test; instead
  // check that the chosen port is outside a range that covers the kernel's first choices.
  net::HeldPort first(io, {});
  const int p = first.port();
  net::HeldPort second(io, {PortRange{p - 2000, p + 2000}});
  CHECK_FALSE(PortRange{p - 2000, p + 2000}.contains(second.port()));
}

TEST_CASE("ports to avoid: HCCL's 32 host ports and the rendezvous port", "[port]") {
  auto ranges = worker_ports_to_avoid({}, 29500);
  CHECK(ranges.at(0).first == 60000);
  CHECK(ranges.at(0).last == 60031);
  CHECK(ranges.at(1).contains(29500));
  CHECK(worker_ports_to_avoid({{"HCCL_IF_BASE_PORT", "50000"}}, 1).at(0).first == 50000);
  CHECK(worker_ports_to_avoid({{"HCCL_IF_BASE_PORT", "garbage"}}, 1).at(0).first == 60000);
  // The highest base that still fits its 32 ports, and one above it (the doctor and the agent
  // once disagreed here by one).
  CHECK(hccl_ports({{"HCCL_IF_BASE_PORT", "65504"}}).last == 65535);
  CHECK(hccl_ports({{"HCCL_IF_BASE_PORT", "65505"}}).first == 60000);
}

TEST_CASE("local address check: loopback passes, a foreign address names the flag", "[port]") {
  CHECK_NOTHROW(net::require_local_address("127.0.0.1", "--master-addr"));
  CHECK_NOTHROW(net::require_local_address("localhost", "--master-addr"));
  // 192.0.2.0/24 is TEST-NET-1: never assigned to a host.
  CHECK_THROWS_WITH(net::require_local_address("192.0.2.7", "--master-addr"),
                    Contains("--master-addr '192.0.2.7' is not an address of this host"));
  CHECK_THROWS_AS(net::require_local_address("no-such-host.invalid", "--master-addr"), UsageError);
}

}  // namespace test_held_port
