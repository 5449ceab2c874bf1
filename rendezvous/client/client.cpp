#include "rendezvous/client/client.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "basics/durations.hpp"
#include "net/own_pause.hpp"
#include "rendezvous/client/client_impl.hpp"

namespace npu_run::rdzv {

namespace {

// Large frames (peer tables) arrive in pieces; an agent's own messages are small, and a server
// that reads nothing for a megabyte of them is not serving.
constexpr net::ConnectionLimits kLinkLimits{Limits::kMaxServerFrame, 4096, size_t{1024} * 1024};

}  // namespace

void RendezvousClient::Impl::start(Handlers h) {
  handlers = std::move(h);
  start_dialer(dialer, [](Impl& self, const std::string& why) { self.fail(why); });
}

// Connections from `d` go to on_connected; `gave_up` runs when it stops trying.
void RendezvousClient::Impl::start_dialer(const std::shared_ptr<ServerDialer>& d,
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

void RendezvousClient::Impl::fail(const std::string& why) {
  if (done) return;
  done = true;
  cancel_all();
  if (auto failed = std::move(handlers.failed)) {
    handlers = {};
    asio::post(io, [failed = std::move(failed), why] { failed(why); });
  }
}

void RendezvousClient::Impl::cancel_all() {
  cancel_pending();
  if (link) link->close();
  if (abandoned) abandoned->close();
}

// Every timer and attempt; the link is left to the caller (close() flushes first).
void RendezvousClient::Impl::cancel_pending() {
  dialer->cancel();
  if (resume_dialer) resume_dialer->cancel();
  heartbeat_timer.cancel();
  watchdog_timer.cancel();
  welcome_timer.cancel();
  silence_timer.cancel();
}

void RendezvousClient::Impl::on_connected(tcp::socket socket) {
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
        cut_short ? self->dialer->last_error()
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
void RendezvousClient::Impl::drop_and_retry(const std::string& reason) {
  ++connection;  // callbacks of the old connection see the change and stand down
  welcome_timer.cancel();
  if (link) link->close();
  link.reset();
  current_dialer().retry(reason);
}

// A connection error: retried before the welcome (see drop_and_retry); after it, the session
// moves to a new connection, unless the server hung up on purpose.
void RendezvousClient::Impl::connection_error(const std::string& reason, bool server_closed) {
  if (!welcomed || resuming) {
    drop_and_retry(reason);
  } else if (established && !server_closed) {
    start_resume(reason);
  } else {
    fail(reason);
  }
}

// The server's silence counts only while this process runs: the watch steps every 250 ms, and a
// step that comes late (net/own_pause.hpp: stopped, starved, paused) moves the deadline by as
// much. What the server sent meanwhile waits unread, and a server in this process (node 0's)
// could not send at all. Any frame heard starts the watch afresh (watch() again).
void RendezvousClient::Impl::watch(milliseconds timeout, const std::string& what) {
  watch_deadline = std::chrono::steady_clock::now() + timeout;
  watch_step([timeout, what](Impl& self) {
    self.fail(fmt::format("the rendezvous server at {} {} ({:.1f} s)", self.endpoint(), what,
                          seconds(timeout)));
  });
}

void RendezvousClient::Impl::watch_step(std::function<void(Impl&)> expired) {
  watchdog_timer.expires_after(kWatchStep);
  watchdog_timer.async_wait([weak = std::weak_ptr<Impl>(shared_from_this()),
                             expired = std::move(expired)](boost::system::error_code ec) {
    auto self = weak.lock();
    if (ec || !self || self->done) return;
    if (net::fired_after_own_pause(self->watchdog_timer))
      self->watch_deadline += net::lateness(self->watchdog_timer);
    if (std::chrono::steady_clock::now() >= self->watch_deadline) {
      expired(*self);
      return;
    }
    self->watch_step(expired);
  });
}

// The server answers every heartbeat, so a link that stays silent for a few intervals is in
// trouble: a partition, or a segment TCP retransmits only after a long backoff (before Linux
// 6.15 it cannot be capped, see net/tcp_timeouts.hpp). A new connection gets through as soon
// as the network does; the old one may take many seconds more.
milliseconds RendezvousClient::Impl::resume_after() const {
  return std::min(std::max(2 * heartbeat_interval, heartbeat_timeout / 3),
                  heartbeat_timeout * 2 / 3);
}

void RendezvousClient::Impl::watch_silence() {
  last_heard = std::chrono::steady_clock::now();
  silence_timer.expires_after(resume_after());
  silence_timer.async_wait([weak = std::weak_ptr<Impl>(shared_from_this()),
                            conn = connection](boost::system::error_code ec) {
    auto self = weak.lock();
    if (ec || !self || self->done || conn != self->connection || self->resuming) return;
    self->start_resume(fmt::format("has been silent for {:.1f} s", seconds(self->resume_after())));
  });
}

// Leaves the current connection open (closing it would send a FIN that may reach the server
// before the resume does, and end the session there) and dials again, every second, until
// the server answers or the watchdog gives up.
void RendezvousClient::Impl::start_resume(const std::string& reason) {
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
void RendezvousClient::Impl::resumed(const Resumed& r) {
  if (auto refusal = ledger.resume_refusal(r.received)) {
    fail(fmt::format("the rendezvous server at {} {}", endpoint(), *refusal));
    return;
  }
  ledger.acknowledge(r.received);
  for (const auto& frame : ledger.unconfirmed()) link->send(frame);
  spdlog::info(
      "the session with the rendezvous server at {} resumed on a new connection, "
      "{:.1f} s after the server was last heard from ({} message(s) sent again)",
      endpoint(),
      std::chrono::duration<double>(std::chrono::steady_clock::now() - last_heard).count(),
      ledger.unconfirmed().size());
  resuming = false;
  resume_dialer->cancel();
  if (abandoned) abandoned->close();
  abandoned.reset();
  watch_silence();
}

// The server declares a silent agent lost after the heartbeat timeout and tells the other
// nodes who it was. The agent's own watchdog waits a little longer, so that where both sides
// see the same silence, the server's verdict (naming the lost node) is the one every
// surviving node hears, and not each agent's own "server lost".
milliseconds RendezvousClient::Impl::watchdog_timeout() const {
  return heartbeat_timeout + std::max(heartbeat_interval, heartbeat_timeout / 10);
}

// Sends what is queued, then closes.
void RendezvousClient::Impl::close() {
  if (done) return;
  done = true;
  handlers = {};
  cancel_pending();
  if (abandoned) abandoned->close();
  if (link) link->close_after_sending();
}

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
