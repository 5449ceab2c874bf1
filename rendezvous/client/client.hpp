// The agent's connection to the rendezvous server: connects with exponential backoff and jitter
// until a deadline (`rendezvous/client/server_dialer.hpp`), says hello, then exchanges framed
// messages. Sends heartbeats at the interval the server asks for and declares the server lost
// when it falls silent.
//
// Before the server's welcome, a connection that breaks or stays silent for 10 s is dropped and
// dialled again like a refused one: a full accept queue makes half-open connections (the client
// saw the handshake complete, the server dropped it), which only a new connection cures. After
// the welcome, a link that is silent for max(2 intervals, timeout/3) (at most 2/3 of the
// timeout), or breaks with an error, is replaced: the agent leaves it open (its FIN could end
// the session before the resume arrives), dials again with a fresh SYN every second, and
// resumes the session on the new connection, which sends again what either side missed. The
// server closing the connection, refusing the resume, or the watchdog (the heartbeat timeout
// plus max(interval, timeout/10), so that the server names a lost node first) is final.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "rendezvous/protocol/messages.hpp"

namespace boost::asio {
class io_context;
}

namespace npu_run::rdzv {

struct ClientOptions {
  std::string server_host;  // name or address
  int server_port = 29500;
  std::chrono::milliseconds connect_timeout{900'000};  // keep retrying until this has passed
  std::chrono::milliseconds welcome_timeout{10'000};   // per connection: then a new one
  Hello hello;                                         // its nonce is filled in per connection
  std::string token;                                   // the job's rendezvous token; empty: none
};

class RendezvousClient {
 public:
  struct Handlers {
    // Connected and greeted; `local_addr` is this host's address on the connection, which is
    // the address peers can reach it at unless --local-addr says otherwise.
    std::function<void(const std::string& local_addr)> connected;
    std::function<void(const ServerMessage&)> message;  // everything after the welcome
    // Fatal: never connected in time, refused, protocol error, or the server went away/silent.
    std::function<void(const std::string& why)> failed;
    // Called for each heartbeat: this node's ranks' beats when they changed (npu_run status).
    std::function<std::optional<std::vector<RankBeat>>()> heartbeat_ranks{};
    // Called for each heartbeat: whether this agent reaches etcd (an etcd rendezvous only).
    std::function<std::optional<bool>()> heartbeat_etcd{};
  };

  RendezvousClient(boost::asio::io_context& io, ClientOptions options);
  ~RendezvousClient();
  RendezvousClient(const RendezvousClient&) = delete;
  RendezvousClient& operator=(const RendezvousClient&) = delete;

  void start(Handlers handlers);
  void send(const ClientMessage& message);
  // Sends what is queued, then closes; no handler runs afterwards.
  void close();
  std::string endpoint() const;  // "host:port", for messages
  // The first connection's dials (connections tried until the welcome) and when they began (ms
  // since the epoch): the join carries them for the blame of a slow round.
  int dials() const;
  int64_t first_dial_ms() const;

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;
};

}  // namespace npu_run::rdzv
