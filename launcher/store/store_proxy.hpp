// A node's workers' store in tiered mode (--worker-store tiered): torch's TCPStore protocol
// served to this node's workers (both generations, as StoreServer does) and backed by one
// connection to node 0's store (store/tier_upstream.hpp), so that node 0 holds one connection
// per node instead of one per rank. It coalesces without changing what a client can observe:
//   - waits: concurrent waits on the same keys are one upstream wait, woken together;
//   - adds: while one add of a key is on its way, the node's next adds of that key wait and go
//     as one add of their sum, whose result is handed out in order as if they had run one after
//     another (each add's result is the sum minus the deltas queued after it);
//   - everything else is forwarded, in order per client: a client's next request starts only
//     when its last one is answered (torch clients wait for each answer anyway); a parked wait
//     holds nothing back, as on torch's own server.
// Losing the upstream closes every worker's connection, so that they fail at once instead of
// hanging; a new round (reset, then attach_upstream) starts afresh.
#pragma once

#include <boost/asio/ip/tcp.hpp>
#include <boost/core/noncopyable.hpp>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "store/wire.hpp"

namespace boost::asio {
class io_context;
}

namespace npu_run::store {

struct StoreProxyOptions {
  StoreLimits limits{};
  // Requests one client may have decoded and not yet started (torch clients have one at most);
  // their keys and values together may not pass limits.max_request either.
  size_t max_queued_requests = 1024;
  // As StoreServerOptions::silent_timeout.
  std::chrono::milliseconds silent_timeout{10'000};
};

// What the proxy saved node 0: requests its workers sent, and those it forwarded.
struct ProxyCounters {
  uint64_t client_requests = 0;
  uint64_t upstream_requests = 0;
  uint64_t coalesced_waits = 0;  // waits that joined one already on its way
  uint64_t batched_adds = 0;     // adds that went as part of a sum
};

class StoreProxy : boost::noncopyable {
 public:
  StoreProxy(boost::asio::io_context& io, StoreProxyOptions options = {});
  ~StoreProxy();

  // Serves this host's clients on `acceptor` (bound, kept open by its owner while this proxy
  // runs). Requests that come before the upstream is attached wait for it.
  void listen_for_local_clients(boost::asio::ip::tcp::acceptor& acceptor);
  // Serves a freshly accepted socket (tests; listen_for_local_clients for the rest).
  void adopt(boost::asio::ip::tcp::socket socket);

  using TurnedAway = std::function<void(const std::string& why)>;
  // The connection to node 0's store, for this round. Clients' requests go through it once
  // node 0 has answered its greeting. Closed before that (node 0's accept queue overflowed
  // and the greeting came after its silent timeout, say), nothing went through it: with
  // `turned_away` the clients keep waiting for the next attach_upstream, and the owner dials
  // again; without, it is lost like any other upstream.
  void attach_upstream(boost::asio::ip::tcp::socket socket, TurnedAway turned_away = {});
  // Node 0's store could not be reached: the clients are closed, now and as they come, until
  // reset(); `why` is said once.
  void upstream_unreachable(const std::string& why);
  // A new round: every client connection and the upstream go; requests wait for the next
  // attach_upstream.
  void reset();

  size_t connections() const;
  bool upstream_attached() const;
  ProxyCounters counters() const;

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;
};

}  // namespace npu_run::store
