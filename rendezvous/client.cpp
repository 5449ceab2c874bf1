#include "rendezvous/client.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <array>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <deque>

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
        watchdog_timer(io_context),
        welcome_timer(io_context),
        silence_timer(io_context) {}

  std::string endpoint() const { return dialer->endpoint(); }

  void start(Handlers h) {
    handlers = std::move(h);
    start_dialer(dialer, [](Impl& self, const std::string& why) { self.fail(why); });
  }

  // Connections from `d` go to on_connected; `gave_up` runs when it stops trying.
  void start_dialer(const std::shared_ptr<ServerDialer>& d,
                    void (*gave_up)(Impl&, const std::string&)) {
    std::weak_ptr<Impl> weak = shared_from_this();
    d->start({[weak](tcp::socket connected) {
                if (auto self = weak.lock(); self && !self->done)
                  self->on_connected(std::move(connected));
              },
              [weak, gave_up](const std::string& why) {
                if (auto self = weak.lock()) gave_up(*self, why);
              }});
  }

  // The dialer of the connection being made: the first one's, or the resume's.
  ServerDialer& current_dialer() { return resuming ? *resume_dialer : *dialer; }

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
    if (abandoned) abandoned->close();
  }

  // Every timer and attempt; the link is left to the caller (close() flushes first).
  void cancel_pending() {
    dialer->cancel();
    if (resume_dialer) resume_dialer->cancel();
    heartbeat_timer.cancel();
    watchdog_timer.cancel();
    welcome_timer.cancel();
    silence_timer.cancel();
  }

  void on_connected(tcp::socket socket) {
    link = net::FramedConnection::create(std::move(socket), kLinkLimits);
    local_addr = link->local_address();
    spdlog::debug("connected to the rendezvous server at {} from {}", endpoint(), local_addr);
    ++connection;
    challenged = false;
    welcomed = false;
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
    hello.session = session_key;
    agent_nonce = hello.nonce;
    transmit(hello);
    // No welcome in time: a half-open connection (see drop_and_retry) or a program that is not
    // an npu_run server; either way, another attempt. A resume's server answered before, so a
    // silent connection after a partition is given up on sooner.
    const milliseconds wait = std::min(resuming ? kResumeWelcomeTimeout : options.welcome_timeout,
                                       current_dialer().time_left());
    welcome_timer.expires_after(wait);
    welcome_timer.async_wait([weak, conn = connection, wait](boost::system::error_code wait_ec) {
      auto self = weak.lock();
      if (wait_ec || !self || self->done || conn != self->connection || self->welcomed) return;
      // A wait the join deadline cut short says nothing new ("within 0.0 s"): the error of the
      // attempt before it stays the one reported.
      const bool cut_short = !self->resuming && wait < self->options.welcome_timeout &&
                             !self->dialer->last_error().empty();
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
  // half-open connection never reaches the server; only a new one does. The same holds for a
  // connection that is to resume the session.
  void drop_and_retry(const std::string& reason) {
    ++connection;  // callbacks of the old connection see the change and stand down
    welcome_timer.cancel();
    if (link) link->close();
    link.reset();
    current_dialer().retry(reason);
  }

  // A connection error: retried before the welcome (see drop_and_retry); after it, the session
  // moves to a new connection, unless the server hung up on purpose.
  void connection_error(const std::string& reason, bool server_closed) {
    if (!welcomed || resuming) {
      drop_and_retry(reason);
    } else if (established && !server_closed) {
      start_resume(reason);
    } else {
      fail(reason);
    }
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

  // The server answers every heartbeat, so a link that stays silent for a few intervals is in
  // trouble: a partition, or a segment TCP retransmits only after a long backoff (before Linux
  // 6.15 it cannot be capped, see net/tcp_timeouts.hpp). A new connection gets through as soon
  // as the network does; the old one may take many seconds more.
  milliseconds resume_after() const {
    return std::min(std::max(2 * heartbeat_interval, heartbeat_timeout / 3),
                    heartbeat_timeout * 2 / 3);
  }

  void watch_silence() {
    last_heard = std::chrono::steady_clock::now();
    silence_timer.expires_after(resume_after());
    silence_timer.async_wait([weak = std::weak_ptr<Impl>(shared_from_this()),
                              conn = connection](boost::system::error_code ec) {
      auto self = weak.lock();
      if (ec || !self || self->done || conn != self->connection || self->resuming) return;
      self->start_resume(
          fmt::format("has been silent for {:.1f} s", seconds(self->resume_after())));
    });
  }

  // Leaves the current connection open (closing it would send a FIN that may reach the server
  // before the resume does, and end the session there) and dials again, every second, until
  // the server answers or the watchdog gives up.
  void start_resume(const std::string& reason) {
    if (resuming || done) return;
    resuming = true;
    spdlog::warn(
        "the link to the rendezvous server at {} {}; resuming the session on a new "
        "connection",
        endpoint(), reason);
    abandoned = std::move(link);
    ++connection;
    welcomed = false;
    challenged = false;
    silence_timer.cancel();
    resume_dialer =
        ServerDialer::create(io, options.server_host, options.server_port, watchdog_timeout(),
                             DialPolicy{milliseconds(1'000), milliseconds(1'000), true});
    start_dialer(resume_dialer, [](Impl& self, const std::string& why) {
      self.fail(fmt::format("cannot resume the session with the rendezvous server: {}", why));
    });
  }

  // The server moved the session to this connection: what it did not receive is sent again.
  void resumed(const Resumed& r) {
    const uint64_t first_kept = sent - unacked.size();  // sequence number before unacked[0]
    if (r.received > sent || r.received < first_kept) {
      fail(
          fmt::format("the rendezvous server at {} resumed the session at message {}, but this "
                      "agent sent {} of which {} are confirmed",
                      endpoint(), r.received, sent, first_kept));
      return;
    }
    acknowledged(r.received);
    for (const auto& frame : unacked) link->send(frame);
    spdlog::info(
        "the session with the rendezvous server at {} resumed on a new connection, "
        "{:.1f} s after the server was last heard from ({} message(s) sent again)",
        endpoint(),
        std::chrono::duration<double>(std::chrono::steady_clock::now() - last_heard).count(),
        unacked.size());
    resuming = false;
    resume_dialer->cancel();
    if (abandoned) abandoned->close();
    abandoned.reset();
    watch_silence();
  }

  // The server received the first `count` sequenced messages: no need to keep them.
  void acknowledged(uint64_t count) {
    uint64_t first_kept = sent - unacked.size() + 1;
    while (!unacked.empty() && first_kept <= count) {
      unacked.pop_front();
      ++first_kept;
    }
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
    // Bytes arrived: the server is there, even when a large frame (a big job's peer table on a
    // slow link) takes longer than resume_after() to complete. Resuming then would only send it
    // again from the start.
    if (welcomed && !resuming) {
      watch(watchdog_timeout(), "sent nothing for longer than the heartbeat timeout");
      watch_silence();
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
                        endpoint()),
            true);
        return;
      case Cause::kReadError:
        connection_error(fmt::format("lost the connection to the rendezvous server at {}: {}",
                                     endpoint(), why.text()),
                         false);
        return;
      case Cause::kWriteError:
      case Cause::kQueueFull:
        connection_error(
            fmt::format("cannot send to the rendezvous server at {}: {}", endpoint(), why.text()),
            false);
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
      // The health gate's end of a static job is the job's outcome, not a refusal of this agent:
      // the agent prints it and exits with its own code.
      if (error->code == "health_gate" && handlers.message) {
        handlers.message(message);
        return;
      }
      fail(fmt::format("the rendezvous server at {} {}: {}", endpoint(),
                       resuming ? "refused to resume this agent's session" : "refused this agent",
                       error->message));
      return;
    }
    if (const auto* challenge = std::get_if<Challenge>(&message)) {
      answer(*challenge);
      return;
    }
    if (const auto* welcome = std::get_if<Welcome>(&message)) {
      on_welcome(*welcome);
      return;
    }
    if (!welcomed) {
      fail(fmt::format("the rendezvous server at {} sent '{}' before 'welcome'", endpoint(),
                       message_name(message)));
      return;
    }
    watch(watchdog_timeout(), "sent nothing for longer than the heartbeat timeout");
    if (const auto* r = std::get_if<Resumed>(&message)) {
      if (!resuming) {
        fail(fmt::format("the rendezvous server at {} sent 'resumed' unasked", endpoint()));
        return;
      }
      resumed(*r);
      return;
    }
    if (resuming) {
      fail(fmt::format("the rendezvous server at {} sent '{}' before 'resumed'", endpoint(),
                       message_name(message)));
      return;
    }
    if (const auto* ack = std::get_if<HeartbeatAck>(&message)) {
      if (ack->received > sent) {
        fail(fmt::format("the rendezvous server at {} acknowledged {} messages of the {} sent",
                         endpoint(), ack->received, sent));
        return;
      }
      acknowledged(ack->received);
      return;
    }
    if (sequenced(message)) ++received;
    if (handlers.message) handlers.message(message);
  }

  void on_welcome(const Welcome& welcome) {
    if (!options.token.empty() && !challenged) {
      fail(fmt::format(
          "the rendezvous server at {} accepted this agent without asking for the token this "
          "agent has; it is not this job's server, or it was started without the token",
          endpoint()));
      return;
    }
    welcome_timer.cancel();
    welcomed = true;
    const milliseconds interval(welcome.heartbeat_interval_ms);
    const milliseconds timeout(welcome.heartbeat_timeout_ms);
    if (established && (interval != heartbeat_interval || timeout != heartbeat_timeout)) {
      fail(
          fmt::format("the rendezvous server at {} answered the resume with other heartbeat "
                      "settings; it is not the server this agent joined",
                      endpoint()));
      return;
    }
    heartbeat_interval = interval;
    heartbeat_timeout = timeout;
    const net::TcpTimeouts timeouts = link->bound_tcp_timeouts(watchdog_timeout());
    watch(watchdog_timeout(), "sent nothing for longer than the heartbeat timeout");
    if (resuming) {
      transmit(Resume{session_key, received});
      return;
    }
    spdlog::debug("rendezvous link: TCP retransmissions {}, user timeout {}",
                  timeouts.rto_max_set ? "capped at 1 s (TCP_RTO_MAX_MS)"
                                       : "not capped (no TCP_RTO_MAX_MS before Linux 6.15)",
                  timeouts.user_timeout_set ? "set" : "not set");
    established = true;
    heartbeat();
    watch_silence();
    if (handlers.connected) handlers.connected(local_addr);
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
    transmit(Auth{agent_proof(options.token, options.hello.run_id, challenge.nonce, agent_nonce)});
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
          if (!self->resuming) {
            Heartbeat beat{self->received};
            if (self->handlers.heartbeat_ranks) beat.ranks = self->handlers.heartbeat_ranks();
            if (self->handlers.heartbeat_etcd) beat.etcd = self->handlers.heartbeat_etcd();
            self->transmit(beat);
          }
          self->heartbeat();
        });
  }

  // The agent's messages. Sequenced ones are kept until the server confirms them (at most a few
  // per round: the join and the reports), and wait for a resume to finish.
  void send(const ClientMessage& message) {
    if (done) return;
    if (!established || !sequenced(message)) {
      transmit(message);
      return;
    }
    auto frame = std::make_shared<const std::string>(encode_frame(encode(message)));
    ++sent;
    unacked.push_back(frame);
    if (!resuming && link && link->is_open()) link->send(std::move(frame));
  }

  // On the current connection, now.
  void transmit(const ClientMessage& message) {
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
    if (abandoned) abandoned->close();
    if (link) link->close_after_sending();
  }

  // A resume's connection gets this long for its welcome: the server answered before.
  static constexpr milliseconds kResumeWelcomeTimeout{2'000};

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
  // Sequenced messages (messages.hpp): how many were sent and received, and those sent that the
  // server has not confirmed yet (numbers sent - unacked.size() + 1 .. sent).
  uint64_t sent = 0;
  uint64_t received = 0;
  std::deque<std::shared_ptr<const std::string>> unacked;
  std::chrono::steady_clock::time_point last_heard;  // the last frame of the session
  bool challenged = false;   // the current connection's server proved it knows the token
  bool welcomed = false;     // the current connection was welcomed
  bool established = false;  // welcomed once: the session exists
  bool resuming = false;     // moving the session to a new connection
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
int RendezvousClient::dials() const {
  return impl_->dialer->dials();
}
int64_t RendezvousClient::first_dial_ms() const {
  return impl_->dialer->started_ms();
}

}  // namespace npu_run::rdzv
