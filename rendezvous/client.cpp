#include "rendezvous/client.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <array>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>

#include "net/framed_connection.hpp"
#include "rendezvous/auth.hpp"
#include "rendezvous/protocol.hpp"
#include "rendezvous/server_dialer.hpp"

namespace npu_run::rdzv {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using std::chrono::milliseconds;

namespace {

// Large frames (peer tables) arrive in pieces; an agent's own messages are small, and a server
// that reads nothing for a megabyte of them is not serving.
constexpr net::ConnectionLimits kLinkLimits{Limits::kMaxServerFrame, 4096, size_t{1024} * 1024};

double seconds(milliseconds d) {
  return std::chrono::duration<double>(d).count();
}

}  // namespace

struct RendezvousClient::Impl : std::enable_shared_from_this<Impl> {
  Impl(asio::io_context& io_context, ClientOptions opts)
      : io(io_context),
        options(std::move(opts)),
        dialer(ServerDialer::create(io_context, options.server_host, options.server_port,
                                    options.connect_timeout)),
        heartbeat_timer(io_context),
        watchdog_timer(io_context) {}

  std::string endpoint() const { return dialer->endpoint(); }

  void start(Handlers h) {
    handlers = std::move(h);
    std::weak_ptr<Impl> weak = shared_from_this();
    dialer->start({[weak](tcp::socket connected) {
                     if (auto self = weak.lock(); self && !self->done)
                       self->on_connected(std::move(connected));
                   },
                   [weak](const std::string& why) {
                     if (auto self = weak.lock()) self->fail(why);
                   }});
  }

  void fail(const std::string& why) {
    if (done) return;
    done = true;
    cancel_all();
    if (auto failed = std::move(handlers.failed)) {
      handlers = {};
      asio::post(io, [failed = std::move(failed), why] { failed(why); });
    }
  }

  void cancel_all() {
    cancel_pending();
    if (link) link->close();
  }

  // Every timer and attempt; the link is left to the caller (close() flushes first).
  void cancel_pending() {
    dialer->cancel();
    heartbeat_timer.cancel();
    watchdog_timer.cancel();
  }

  void on_connected(tcp::socket socket) {
    link = net::FramedConnection::create(std::move(socket), kLinkLimits);
    local_addr = link->local_address();
    spdlog::debug("connected to the rendezvous server at {} from {}", endpoint(), local_addr);
    ++connection;
    challenged = false;
    std::weak_ptr<Impl> weak = shared_from_this();
    link->start({[weak, conn = connection](std::vector<std::string>& frames,
                                           const std::optional<ProtocolError>& error) {
                   auto self = weak.lock();
                   if (self && !self->done && conn == self->connection)
                     self->on_frames(frames, error);
                 },
                 [weak, conn = connection](const net::ConnectionClosed& why) {
                   auto self = weak.lock();
                   if (self && !self->done && conn == self->connection) self->on_link_closed(why);
                 }});
    Hello hello = options.hello;
    hello.nonce = options.token.empty() ? "" : random_nonce();
    agent_nonce = hello.nonce;
    send(hello);
    // No welcome in time: a half-open connection (see drop_and_retry) or a program that is not
    // an npu_run server; either way, another attempt.
    const milliseconds wait = std::min(options.welcome_timeout, dialer->time_left());
    watchdog_timer.expires_after(wait);
    watchdog_timer.async_wait([weak = std::weak_ptr<Impl>(shared_from_this()), conn = connection,
                               wait](boost::system::error_code wait_ec) {
      auto self = weak.lock();
      if (wait_ec || !self || self->done || conn != self->connection || self->welcomed) return;
      // A wait the join deadline cut short says nothing new ("within 0.0 s"): the error of the
      // attempt before it stays the one reported.
      const bool cut_short =
          wait < self->options.welcome_timeout && !self->dialer->last_error().empty();
      self->drop_and_retry(
          cut_short
              ? self->dialer->last_error()
              : fmt::format("no answer to the hello within {:.1f} s; is another program using "
                            "that port?",
                            seconds(wait)));
    });
  }

  // Before the welcome, a connection that dies or stays silent is one more failed attempt, not
  // the end: when a burst of agents overflows the server's accept queue, the kernel drops the
  // last handshake packet while this side already counts the connection as established. That
  // half-open connection never reaches the server; only a new one does.
  void drop_and_retry(const std::string& reason) {
    ++connection;  // callbacks of the old connection see the change and stand down
    watchdog_timer.cancel();
    if (link) link->close();
    link.reset();
    dialer->retry(reason);
  }

  // A connection error: retried before the welcome (see drop_and_retry), fatal after it.
  void connection_error(const std::string& reason) {
    if (welcomed)
      fail(reason);
    else
      drop_and_retry(reason);
  }

  void watch(milliseconds timeout, const std::string& what) {
    watchdog_timer.expires_after(timeout);
    watchdog_timer.async_wait([weak = std::weak_ptr<Impl>(shared_from_this()), what,
                               timeout](boost::system::error_code ec) {
      auto self = weak.lock();
      if (ec || !self || self->done) return;
      self->fail(fmt::format("the rendezvous server at {} {} ({:.1f} s)", self->endpoint(), what,
                             seconds(timeout)));
    });
  }

  void on_frames(const std::vector<std::string>& frames,
                 const std::optional<ProtocolError>& error) {
    if (error) {
      fail(fmt::format(
          "{} did not answer as an npu_run rendezvous server ({}); is another program using "
          "that port?",
          endpoint(), error->message));
      return;
    }
    for (const std::string& frame : frames) {
      if (done) return;
      on_frame(frame);
    }
  }

  void on_link_closed(const net::ConnectionClosed& why) {
    using Cause = net::ConnectionClosed::Cause;
    switch (why.cause) {
      case Cause::kPeerClosed:
        connection_error(
            fmt::format("lost the connection to the rendezvous server at {}: closed by the server",
                        endpoint()));
        return;
      case Cause::kReadError:
        connection_error(fmt::format("lost the connection to the rendezvous server at {}: {}",
                                     endpoint(), why.text()));
        return;
      case Cause::kWriteError:
      case Cause::kQueueFull:
        connection_error(
            fmt::format("cannot send to the rendezvous server at {}: {}", endpoint(), why.text()));
        return;
      case Cause::kSent:
        return;
    }
  }

  void on_frame(const std::string& frame) {
    auto decoded = decode_server_message(frame);
    if (auto* error = std::get_if<ProtocolError>(&decoded)) {
      fail(fmt::format("bad message from the rendezvous server at {}: {}", endpoint(),
                       error->message));
      return;
    }
    const ServerMessage& message = std::get<ServerMessage>(decoded);
    if (const auto* error = std::get_if<ErrorReply>(&message)) {
      fail(fmt::format("the rendezvous server at {} refused this agent: {}", endpoint(),
                       error->message));
      return;
    }
    if (const auto* challenge = std::get_if<Challenge>(&message)) {
      answer(*challenge);
      return;
    }
    if (const auto* welcome = std::get_if<Welcome>(&message)) {
      if (!options.token.empty() && !challenged) {
        fail(fmt::format(
            "the rendezvous server at {} accepted this agent without asking for the token this "
            "agent has; it is not this job's server, or it was started without the token",
            endpoint()));
        return;
      }
      heartbeat_interval = milliseconds(welcome->heartbeat_interval_ms);
      heartbeat_timeout = milliseconds(welcome->heartbeat_timeout_ms);
      welcomed = true;
      const net::TcpTimeouts timeouts = link->bound_tcp_timeouts(watchdog_timeout());
      spdlog::debug("rendezvous link: TCP retransmissions {}, user timeout {}",
                    timeouts.rto_max_set ? "capped at 1 s (TCP_RTO_MAX_MS)"
                                         : "not capped (no TCP_RTO_MAX_MS before Linux 6.15)",
                    timeouts.user_timeout_set ? "set" : "not set");
      heartbeat();
      watch(watchdog_timeout(), "sent nothing for longer than the heartbeat timeout");
      if (handlers.connected) handlers.connected(local_addr);
      return;
    }
    if (!welcomed) {
      fail(fmt::format("the rendezvous server at {} sent '{}' before 'welcome'", endpoint(),
                       message_name(message)));
      return;
    }
    watch(watchdog_timeout(), "sent nothing for longer than the heartbeat timeout");
    if (std::holds_alternative<HeartbeatAck>(message)) return;
    if (handlers.message) handlers.message(message);
  }

  // The server proves it knows the token before this agent answers, so that a stranger on the
  // port learns nothing and cannot pose as the job's server.
  void answer(const Challenge& challenge) {
    if (welcomed || challenged) {
      fail(fmt::format("the rendezvous server at {} sent an unexpected challenge", endpoint()));
      return;
    }
    if (options.token.empty()) {
      fail(fmt::format(
          "the rendezvous server at {} requires a token and this agent has none; give every node "
          "the same token (--rdzv-token-file, NPU_RUN_RDZV_TOKEN or --rdzv-token)",
          endpoint()));
      return;
    }
    const std::string expected =
        server_proof(options.token, options.hello.run_id, agent_nonce, challenge.nonce);
    if (!proofs_match(expected, challenge.proof)) {
      fail(fmt::format(
          "the rendezvous server at {} does not know this agent's token (its proof did not "
          "match); give every node the same token",
          endpoint()));
      return;
    }
    challenged = true;
    send(Auth{agent_proof(options.token, options.hello.run_id, challenge.nonce, agent_nonce)});
  }

  // The server declares a silent agent lost after the heartbeat timeout and tells the other
  // nodes who it was. The agent's own watchdog waits a little longer, so that where both sides
  // see the same silence, the server's verdict (naming the lost node) is the one every
  // surviving node hears, and not each agent's own "server lost".
  milliseconds watchdog_timeout() const {
    return heartbeat_timeout + std::max(heartbeat_interval, heartbeat_timeout / 10);
  }

  void heartbeat() {
    heartbeat_timer.expires_after(heartbeat_interval);
    heartbeat_timer.async_wait(
        [weak = std::weak_ptr<Impl>(shared_from_this())](boost::system::error_code ec) {
          auto self = weak.lock();
          if (ec || !self || self->done) return;
          self->send(Heartbeat{});
          self->heartbeat();
        });
  }

  void send(const ClientMessage& message) {
    if (done || !link || !link->is_open()) return;
    auto frame = std::make_shared<const std::string>(encode_frame(encode(message)));
    // A heartbeat behind other frames says nothing they do not.
    if (std::holds_alternative<Heartbeat>(message))
      link->send_unless_busy(std::move(frame));
    else
      link->send(std::move(frame));
  }

  // Sends what is queued, then closes.
  void close() {
    if (done) return;
    done = true;
    handlers = {};
    cancel_pending();
    if (link) link->close_after_sending();
  }

  asio::io_context& io;
  ClientOptions options;
  std::shared_ptr<ServerDialer> dialer;
  asio::steady_timer heartbeat_timer;
  asio::steady_timer watchdog_timer;
  Handlers handlers;
  std::string local_addr;
  std::shared_ptr<net::FramedConnection> link;  // of the current connection, once connected
  milliseconds heartbeat_interval{5'000};
  milliseconds heartbeat_timeout{30'000};
  uint64_t connection = 0;  // counts connections, so callbacks of a dropped one can tell
  std::string agent_nonce;  // of the current connection's hello
  bool challenged = false;  // the current connection's server proved it knows the token
  bool welcomed = false;
  bool done = false;
};

RendezvousClient::RendezvousClient(asio::io_context& io, ClientOptions options)
    : impl_(std::make_shared<Impl>(io, std::move(options))) {}

RendezvousClient::~RendezvousClient() {
  impl_->close();
}

void RendezvousClient::start(Handlers handlers) {
  impl_->start(std::move(handlers));
}
void RendezvousClient::send(const ClientMessage& message) {
  impl_->send(message);
}
void RendezvousClient::close() {
  impl_->close();
}
std::string RendezvousClient::endpoint() const {
  return impl_->endpoint();
}

}  // namespace npu_run::rdzv
