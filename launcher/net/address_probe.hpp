// Checks of an address before anything serves there: where HOST:PORT resolves to, whether this
// host could bind it (free, taken, or not an address of this host), and whether something
// already accepts connections on it. The one resolve-then-bind probe of the code base: the
// local-address check of single-node jobs, `npu_run doctor`, node 0 deciding to serve.
#pragma once

#include <boost/asio/ip/tcp.hpp>
#include <string>
#include <vector>

namespace npu_run::net {

struct ResolvedEndpoints {
  std::vector<boost::asio::ip::tcp::endpoint> endpoints;
  std::string error;  // why it did not resolve; empty when it did
  // The name does not exist (NXDOMAIN, EAI_NONAME), rather than a lookup that failed for now.
  bool not_found = false;
};
// HOST:PORT (numeric port), resolved synchronously.
ResolvedEndpoints resolve_endpoints(const std::string& host, int port);

enum class BindOutcome { kFree, kInUse, kNotLocal };
struct BindProbe {
  BindOutcome outcome = BindOutcome::kNotLocal;
  boost::asio::ip::tcp::endpoint endpoint;  // the one found free or in use
};
// Binds a socket to each endpoint for a moment: the first that is free, else the first in use,
// else none of them is an address of this host.
BindProbe probe_bind(const std::vector<boost::asio::ip::tcp::endpoint>& endpoints);

// True when something accepts TCP connections on `endpoint` (a local address: answers at once).
bool someone_listens(const boost::asio::ip::tcp::endpoint& endpoint);

}  // namespace npu_run::net
