// The workers' store served by npu_run: torch's TCPStore protocol (store/wire.hpp, both
// generations, told apart per connection) over one KeyValueStore, on the agent's io_context.
// Connections come from another listener (the rendezvous port, whose first bytes said "not a
// rendezvous frame") or from a listener of its own.
//
// Bounded against any peer: requests are checked before anything is buffered (StoreLimits), the
// store's size is capped, and replies wait in a queue of at most max_queued_bytes; a peer that
// breaks a rule loses its connection, never the store or the agent. Replies to the requests of
// one read go out together; WATCH_KEY (which torch 1.13's Python API cannot send) is refused.
//
// torch 2.6's env:// against it: Debian's 2.6 is built without libuv and its agent-store branch
// asks for libuv regardless; the suite's torch 2.6 environment defaults use_libuv to False for
// that name (tests/torch2/site/sitecustomize.py), as a PyPI build would need no help. Users of
// such a build pick --worker-store torch.
#pragma once

#include <boost/core/noncopyable.hpp>
#include <chrono>
#include <cstdint>
#include <memory>
#include <string>

#include "net/stream_connection.hpp"
#include "store/wire.hpp"

namespace boost::asio {
class io_context;
}

namespace npu_run::store {

struct StoreServerOptions {
  StoreLimits limits{};
  size_t max_store_bytes = size_t{1} << 30;
  // Replies waiting for a peer that does not read: a multi_get of the largest values may wait.
  size_t max_queued_bytes = size_t{160} * 1024 * 1024;
  // A connection that has not said a byte this long after it was opened is closed, quietly:
  // torch 1.13's clients open a second connection for watch_key callbacks that never speaks
  // (npu_run serves no watch_key, and closing it costs the client nothing), and anything else
  // that silent holds a descriptor for nothing. Speaking once makes a connection's idleness
  // its own business: a client may keep its store for the whole job.
  std::chrono::milliseconds silent_timeout{10'000};
};

class StoreServer : boost::noncopyable {
 public:
  StoreServer(boost::asio::io_context& io, StoreServerOptions options = {});
  ~StoreServer();

  // Serves a started connection another protocol's reader handed over; `first_bytes` were read
  // from it already.
  void adopt(const std::shared_ptr<net::StreamConnection>& connection,
             const std::string& first_bytes);
  // Serves a freshly accepted socket.
  void adopt(boost::asio::ip::tcp::socket socket);
  // Listens on `acceptor` (bound, and kept open by its owner for as long as this server runs)
  // and serves what it accepts from this host only: torch's store protocol has no
  // authentication, and a single-node job's workers are all here.
  void listen_for_local_clients(boost::asio::ip::tcp::acceptor& acceptor);

  // The silent rule of StoreServerOptions, for connections adopted from now on (a shared port
  // uses its handshake deadline).
  void set_silent_timeout(std::chrono::milliseconds timeout);

  // A fresh key space: a new round of the job must not see the last one's keys. Waits parked in
  // the old one are dropped (their clients belong to workers that were stopped).
  void clear();
  // Closes every connection.
  void stop();
  size_t connections() const;
  size_t keys() const;
  uint64_t requests() const;  // served since the server started, for --metrics-port

  // Limits of a connection's reads and reply queue (also for listeners that accept for it).
  net::ConnectionLimits connection_limits() const;

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;
};

}  // namespace npu_run::store
