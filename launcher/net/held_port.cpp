#include "net/held_port.hpp"

#include <fmt/format.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ip/v6_only.hpp>

#include "basics/usage_error.hpp"
#include "net/address_probe.hpp"
#include "net/cloexec_socket.hpp"

namespace npu_run::net {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;

struct HeldPort::Socket {
  explicit Socket(asio::io_context& io) : acceptor(io) {}
  tcp::acceptor acceptor;
};

namespace {

// Opens and binds an acceptor without listening; dual-stack [::] covers IPv4 too, so one socket
// blocks the port for both families.
std::unique_ptr<HeldPort::Socket> bind_ephemeral(asio::io_context& io) {
  auto s = std::make_unique<HeldPort::Socket>(io);
  boost::system::error_code ec;
  net::open_cloexec(s->acceptor, tcp::v6(), ec);
  if (!ec) {
    s->acceptor.set_option(asio::ip::v6_only(false), ec);
    s->acceptor.set_option(tcp::acceptor::reuse_address(true), ec);
    s->acceptor.bind(tcp::endpoint(asio::ip::address_v6::any(), 0), ec);
  }
  if (ec) {  // no IPv6 on this host: fall back to IPv4 only
    s = std::make_unique<HeldPort::Socket>(io);
    net::open_cloexec(s->acceptor, tcp::v4(), ec);
    if (!ec) s->acceptor.set_option(tcp::acceptor::reuse_address(true), ec);
    if (!ec) s->acceptor.bind(tcp::endpoint(asio::ip::address_v4::any(), 0), ec);
  }
  if (ec)
    throw std::runtime_error(
        fmt::format("cannot reserve a port for the workers: bind: {}", ec.message()));
  return s;
}

}  // namespace

HeldPort::HeldPort(asio::io_context& io, const std::vector<PortRange>& avoid) {
  // Keep rejected sockets open until the end so the kernel cannot offer the same port again.
  std::vector<std::unique_ptr<Socket>> rejected;
  for (int attempt = 0; attempt < 64; ++attempt) {
    auto s = bind_ephemeral(io);
    const int port = s->acceptor.local_endpoint().port();
    const bool bad = std::any_of(avoid.begin(), avoid.end(),
                                 [&](const PortRange& r) { return r.contains(port); });
    if (!bad) {
      socket_ = std::move(s);
      return;
    }
    rejected.push_back(std::move(s));
  }
  throw std::runtime_error(
      "cannot reserve a port for the workers: the kernel kept offering ports "
      "reserved for HCCL or the rendezvous; widen net.ipv4.ip_local_port_range");
}

HeldPort::~HeldPort() = default;
HeldPort::HeldPort(HeldPort&&) noexcept = default;
HeldPort& HeldPort::operator=(HeldPort&&) noexcept = default;

int HeldPort::port() const {
  return socket_->acceptor.local_endpoint().port();
}

asio::ip::tcp::acceptor& HeldPort::acceptor() {
  return socket_->acceptor;
}

void require_local_address(const std::string& addr, const std::string& source) {
  const ResolvedEndpoints resolved = resolve_endpoints(addr, 0);
  if (!resolved.error.empty()) {
    throw UsageError(
        fmt::format("{} '{}': cannot resolve it ({}); give an IP address or a host name "
                    "this machine can resolve",
                    source, addr, resolved.error));
  }
  if (probe_bind(resolved.endpoints).outcome != BindOutcome::kNotLocal) return;
  throw UsageError(fmt::format(
      "{} '{}' is not an address of this host, but a single-node job runs its workers here; "
      "drop it (127.0.0.1 is used) or give one of this host's addresses",
      source, addr));
}

}  // namespace npu_run::net
