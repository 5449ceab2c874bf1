// Who may hold a connection to the rendezvous before joining it. Every new connection is a
// stranger until the state machine takes its join: it has the handshake timeout to get there,
// and strangers together are capped, the oldest closed first, so idle, half-sent (slowloris)
// and welcomed-but-idle connections cannot use up the descriptors real agents need. A stranger
// whose time is up is handed to the other protocol on the port when that one takes it
// (server_protocol_switch.hpp), else dropped. Strangers' drops go through a rate-limited log;
// agents' are logged at once.
#pragma once

#include <chrono>
#include <cstddef>
#include <deque>
#include <functional>
#include <optional>
#include <string>

#include "rendezvous/server/server_protocol_switch.hpp"
#include "rendezvous/server/server_sessions.hpp"
#include "rendezvous/server/stranger_log.hpp"

namespace npu_run::rdzv {

class Admission {
 public:
  struct Rules {
    size_t cap;                                   // strangers at most
    std::chrono::milliseconds handshake_timeout;  // to say hello, prove the token and join
    bool token;                                   // the job has one to prove
  };
  // The rules of a server: strangers together may hold max_unjoined connections, else 1024 or
  // twice the job's nodes, whichever is more.
  static Rules rules_for(const ServerOptions& options, const JobSettings& job);
  // `forget` ends a session for the server (the state machine hears of it).
  Admission(Sessions& sessions, Rules rules, ProtocolSwitch::OtherProtocol other,
            std::function<void(ClientId)> forget)
      : sessions_(sessions), rules_(rules), switch_(std::move(other)), forget_(std::move(forget)) {}

  bool serves_other_protocol() const { return switch_.enabled(); }
  // A connection arrived: a stranger; over the cap, the oldest stranger is closed.
  void connected(ClientId id);
  // Welcomed: the agent may now send full-size frames (its join).
  void welcomed(ClientId id);
  // Its join was taken: no longer a stranger.
  void joined(ClientId id);
  // A session ended (before forget's state machine call).
  void left(const Session& session);

  // Its handshake deadline passed: unless it joined, the other protocol's, or a stranger's to
  // drop.
  void handshake_over(ClientId id);
  // Its first bytes were not a rendezvous frame.
  void hand_over(ClientId id, std::string first_bytes);

  // Agents are named in the log at once; strangers go through the rate-limited log.
  void note_dropped(const Session& session, const std::string& why);
  void note_stranger(const std::string& what);
  // `session`'s connection ended by itself; `awaited_proof`: before it proved the token.
  void note_closed(const Session& session, const net::ConnectionClosed& why, bool awaited_proof);
  // The server refused `session` (null: one of several, or one already gone).
  void note_refused(const Session* session, const std::string& message);
  // What the rate-limited log only counted so far; `all`: even within its interval.
  void flush(bool all = false);

 private:
  std::optional<ClientId> oldest_stranger();
  void retire(ClientId id, const std::string& why);
  void drop_stranger(ClientId id, const std::string& why);

  Sessions& sessions_;
  Rules rules_;
  ProtocolSwitch switch_;
  std::function<void(ClientId)> forget_;
  // Connections in their handshake, oldest first (welcomed or closed ones are skipped lazily).
  std::deque<ClientId> handshaking_;
  // Welcomed connections that have not joined yet, oldest first (evicted after `handshaking_`).
  std::deque<ClientId> welcomed_unjoined_;
  size_t strangers_ = 0;
  StrangerLog log_{std::chrono::seconds(5)};
};

}  // namespace npu_run::rdzv
