// The inside of the agent's rendezvous client (rendezvous/client/client.hpp), for its two files:
// the connection's life (rendezvous/client/client.cpp: dialling, the welcome's deadline, the resume
// on a new connection, the watchdogs) and the messages on it (rendezvous/client/client_frames.cpp:
// the handshake, heartbeats, what the agent sends and what it hears).
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "net/framed_connection.hpp"
#include "rendezvous/client/client.hpp"
#include "rendezvous/client/server_dialer.hpp"
#include "rendezvous/protocol/auth.hpp"
#include "rendezvous/protocol/protocol.hpp"
#include "rendezvous/protocol/session_ledger.hpp"

namespace npu_run::rdzv {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using std::chrono::milliseconds;

struct RendezvousClient::Impl : std::enable_shared_from_this<Impl> {
  Impl(asio::io_context& io_context, ClientOptions opts)
      : io(io_context),
        options(std::move(opts)),
        dialer(ServerDialer::create(io_context, options.server_host, options.server_port,
                                    options.connect_timeout)),
        heartbeat_timer(io_context),
        watchdog_timer(io_context),
        welcome_timer(io_context),
        silence_timer(io_context) {}

  std::string endpoint() const { return dialer->endpoint(); }

  void start(Handlers h);

  // Connections from `d` go to on_connected; `gave_up` runs when it stops trying.
  void start_dialer(const std::shared_ptr<ServerDialer>& d,
                    void (*gave_up)(Impl&, const std::string&));

  // The dialer of the connection being made: the first one's, or the resume's.
  ServerDialer& current_dialer() { return resuming ? *resume_dialer : *dialer; }

  void fail(const std::string& why);

  void cancel_all();

  // Every timer and attempt; the link is left to the caller (close() flushes first).
  void cancel_pending();

  void on_connected(tcp::socket socket);

  // Before the welcome, a connection that dies or stays silent is one more failed attempt, not
  // the end: when a burst of agents overflows the server's accept queue, the kernel drops the
  // last handshake packet while this side already counts the connection as established. That
  // half-open connection never reaches the server; only a new one does. The same holds for a
  // connection that is to resume the session.
  void drop_and_retry(const std::string& reason);

  // A connection error: retried before the welcome (see drop_and_retry); after it, the session
  // moves to a new connection, unless the server hung up on purpose.
  void connection_error(const std::string& reason, bool server_closed);

  // Fails the session unless a frame comes within `timeout` of this process's running time.
  void watch(milliseconds timeout, const std::string& what);
  void watch_step(std::function<void(Impl&)> expired);

  // The server answers every heartbeat, so a link that stays silent for a few intervals is in
  // trouble: a partition, or a segment TCP retransmits only after a long backoff (before Linux
  // 6.15 it cannot be capped, see net/tcp_timeouts.hpp). A new connection gets through as soon
  // as the network does; the old one may take many seconds more.
  milliseconds resume_after() const;

  void watch_silence();

  // Leaves the current connection open (closing it would send a FIN that may reach the server
  // before the resume does, and end the session there) and dials again, every second, until
  // the server answers or the watchdog gives up.
  void start_resume(const std::string& reason);

  // The server moved the session to this connection: what it did not receive is sent again.
  void resumed(const Resumed& r);

  void on_frames(const std::vector<std::string>& frames, const std::optional<ProtocolError>& error);

  void on_link_closed(const net::ConnectionClosed& why);

  void on_frame(const std::string& frame);

  void on_welcome(const Welcome& welcome);

  void answer(const Challenge& challenge);

  // The server declares a silent agent lost after the heartbeat timeout and tells the other
  // nodes who it was. The agent's own watchdog waits a little longer, so that where both sides
  // see the same silence, the server's verdict (naming the lost node) is the one every
  // surviving node hears, and not each agent's own "server lost".
  milliseconds watchdog_timeout() const;

  void heartbeat();

  // The agent's messages. Sequenced ones are kept until the server confirms them (at most a few
  // per round: the join and the reports), and wait for a resume to finish.
  void send(const ClientMessage& message);

  // On the current connection, now.
  void transmit(const ClientMessage& message);

  // Sends what is queued, then closes.
  void close();

  // A resume's connection gets this long for its welcome: the server answered before.
  static constexpr milliseconds kResumeWelcomeTimeout{2'000};
  // The watchdog's step: a step later than net::kOwnPauseAfter is this process's own pause.
  static constexpr milliseconds kWatchStep{250};

  asio::io_context& io;
  ClientOptions options;
  std::shared_ptr<ServerDialer> dialer;
  std::shared_ptr<ServerDialer> resume_dialer;  // while resuming
  asio::steady_timer heartbeat_timer;
  asio::steady_timer watchdog_timer;  // the server silent past the heartbeat timeout: fatal
  asio::steady_timer welcome_timer;   // a connection's hello unanswered: another connection
  asio::steady_timer silence_timer;   // the link silent for resume_after(): resume
  Handlers handlers;
  std::string local_addr;
  std::shared_ptr<net::FramedConnection> link;       // of the current connection, once connected
  std::shared_ptr<net::FramedConnection> abandoned;  // the one a resume replaces, until it has
  milliseconds heartbeat_interval{5'000};
  milliseconds heartbeat_timeout{30'000};
  uint64_t connection = 0;  // counts connections, so callbacks of a dropped one can tell
  std::string agent_nonce;  // of the current connection's hello
  // Names this session to the server when a new connection resumes it.
  const std::string session_key = random_nonce().substr(0, 32);
  SessionLedger ledger;  // the sequenced messages sent and received (messages.hpp)
  std::chrono::steady_clock::time_point last_heard;      // the last frame of the session
  std::chrono::steady_clock::time_point watch_deadline;  // the watchdog's, moved by pauses
  bool challenged = false;   // the current connection's server proved it knows the token
  bool welcomed = false;     // the current connection was welcomed
  bool established = false;  // welcomed once: the session exists
  bool resuming = false;     // moving the session to a new connection
  bool done = false;
};

}  // namespace npu_run::rdzv
