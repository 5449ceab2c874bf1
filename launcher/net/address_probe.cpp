#include "net/address_probe.hpp"

#include <boost/asio/io_context.hpp>

#include "net/cloexec_socket.hpp"

namespace npu_run::net {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;

ResolvedEndpoints resolve_endpoints(const std::string& host, int port) {
  asio::io_context io;
  tcp::resolver resolver(io);
  boost::system::error_code ec;
  const auto results =
      resolver.resolve(host, std::to_string(port), tcp::resolver::numeric_service, ec);
  ResolvedEndpoints resolved;
  if (ec) {
    resolved.error = ec.message();
    resolved.not_found = ec == asio::error::host_not_found;
    return resolved;
  }
  for (const auto& entry : results) resolved.endpoints.push_back(entry.endpoint());
  return resolved;
}

BindProbe probe_bind(const std::vector<tcp::endpoint>& endpoints) {
  asio::io_context io;
  BindProbe in_use;
  bool any_in_use = false;
  for (const tcp::endpoint& endpoint : endpoints) {
    tcp::acceptor probe(io);
    boost::system::error_code ec;
    net::open_cloexec(probe, endpoint.protocol(), ec);
    if (!ec) probe.bind(endpoint, ec);
    if (!ec) return BindProbe{BindOutcome::kFree, endpoint};
    if (ec == asio::error::address_in_use && !any_in_use) {
      in_use = BindProbe{BindOutcome::kInUse, endpoint};
      any_in_use = true;
    }
  }
  return any_in_use ? in_use : BindProbe{};
}

bool someone_listens(const tcp::endpoint& endpoint) {
  asio::io_context io;
  tcp::socket probe(io);
  boost::system::error_code ec;
  net::open_cloexec(probe, endpoint.protocol(), ec);
  if (!ec) probe.connect(endpoint, ec);
  return !ec;
}

}  // namespace npu_run::net
