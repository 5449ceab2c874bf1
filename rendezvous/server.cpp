#include "rendezvous/server.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <array>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <deque>
#include <fstream>
#include <optional>
#include <unordered_map>
#include <unordered_set>

#include "net/accept_loop.hpp"
#include "net/cloexec_socket.hpp"
#include "net/framed_connection.hpp"
#include "net/kernel_limits.hpp"
#include "rendezvous/protocol.hpp"
#include "rendezvous/server_log.hpp"
#include "rendezvous/stranger_log.hpp"

namespace npu_run::rdzv {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;

namespace {

double seconds(milliseconds d) {
  return std::chrono::duration<double>(d).count();
}

}  // namespace

// One agent's session: its connection (a resume may replace it), the deadline of its handshake,
// and the sequenced messages (messages.hpp) both ways.
struct Session {
  Session(std::shared_ptr<net::FramedConnection> c, std::shared_ptr<ClientId> r,
          asio::io_context& io)
      : connection(std::move(c)), route(std::move(r)), handshake_deadline(io) {}
  std::shared_ptr<net::FramedConnection> connection;
  // Where the connection's frames go: this session's id, or the one it resumed.
  std::shared_ptr<ClientId> route;
  asio::steady_timer handshake_deadline;
  std::string resume_key;      // from the hello
  bool authenticated = false;  // welcomed: may send full-size frames
  bool joined = false;         // its join was taken: an agent of the job, no longer a stranger
  uint64_t received = 0;       // sequenced messages from the agent
  uint64_t sent = 0;           // sequenced messages to it; those not yet confirmed are kept:
  std::deque<std::shared_ptr<const std::string>> unacked;  // numbers sent - size + 1 .. sent
  size_t unacked_bytes = 0;
  bool resumable = true;  // false once the kept messages outgrew kMaxUnackedBytes
};

// Agents' frames are small: a 1 KiB read buffer keeps 16k idle sessions cheap. What waits to be
// sent is one frame of any allowed size plus a little: an agent that reads never comes near it.
constexpr net::ConnectionLimits kSessionLimits{Limits::kMaxHandshakeFrame, 1024,
                                               Limits::kMaxServerFrame + size_t{1024} * 1024};
// What a session keeps for a resume: as much as may wait to be sent. The frames are shared with
// the other sessions' queues; an agent that confirms nothing for that long cannot resume.
constexpr size_t kMaxUnackedBytes = kSessionLimits.max_queued_bytes;

struct RendezvousServer::Impl : std::enable_shared_from_this<Impl> {
  Impl(asio::io_context& io_context, JobSettings job, ServerOptions opts)
      : io(io_context),
        options(std::move(opts)),
        state(std::move(job), now()),
        tick_timer(io_context),
        barrier_timer(io_context) {}

  // Binds and listens on `address_text`:`port`; throws BindError.
  std::unique_ptr<tcp::acceptor> listen_on(const std::string& address_text, int port) {
    boost::system::error_code ec;
    const auto address = asio::ip::make_address(address_text, ec);
    if (ec) {
      throw BindError(fmt::format("rendezvous server: '{}' is not an IP address", address_text),
                      false, true);
    }
    const tcp::endpoint endpoint(address, static_cast<unsigned short>(port));
    auto acceptor = std::make_unique<tcp::acceptor>(io);
    net::open_cloexec(*acceptor, endpoint.protocol(), ec);
    // SO_REUSEADDR: a job restarted right after the last one must not wait out TIME_WAIT.
    if (!ec) acceptor->set_option(tcp::acceptor::reuse_address(true), ec);
    if (!ec) acceptor->bind(endpoint, ec);
    if (ec) {
      const bool in_use = ec == asio::error::address_in_use;
      const bool not_local = ec == boost::system::errc::address_not_available;
      throw BindError(
          fmt::format("rendezvous server: cannot bind {}:{}: {}", address_text, port, ec.message()),
          in_use, not_local);
    }
    acceptor->listen(listen_backlog, ec);
    // With SO_REUSEADDR, Linux may let bind() succeed next to a listening socket and report the
    // clash only here.
    if (ec) {
      throw BindError(fmt::format("rendezvous server: cannot listen on {}:{}: {}", address_text,
                                  port, ec.message()),
                      ec == asio::error::address_in_use, false);
    }
    return acceptor;
  }

  // The main address decides the port; the others (a master name with several addresses of
  // this host) are served on the same port when they can be, and skipped with a word if not.
  void bind() {
    // The kernel caps any backlog at net.core.somaxconn; asking for exactly that is the most.
    const auto somaxconn = kernel_queues().front().value;
    listen_backlog =
        options.backlog > 0 ? options.backlog : static_cast<int>(somaxconn.value_or(4096));
    add_acceptor(options.bind_addr, listen_on(options.bind_addr, options.port));
    for (const std::string& more : options.also_bind) {
      if (more == options.bind_addr) continue;
      try {
        add_acceptor(more, listen_on(more, port()));
      } catch (const BindError& e) {
        if (e.address_not_local)
          spdlog::debug("{}: not an address of this host, not served", more);
        else
          spdlog::warn("{}; agents must reach the server through another address", e.what());
      }
    }
  }

  void add_acceptor(const std::string& address, std::unique_ptr<tcp::acceptor> acceptor) {
    served.push_back(address.find(':') != std::string::npos ? "[" + address + "]" : address);
    acceptors.push_back(std::move(acceptor));
  }

  void start(DoneHandler handler) {
    on_done = std::move(handler);
    const auto& s = state.settings();
    std::vector<std::string> endpoints;
    for (const std::string& address : served)
      endpoints.push_back(fmt::format("{}:{}", address, port()));
    spdlog::info("rendezvous server on {} for {} node{} (run id '{}', backlog {})",
                 fmt::join(endpoints, " and "), s.max_nodes, s.max_nodes == 1 ? "" : "s", s.run_id,
                 listen_backlog);
    if (const std::string warning = kernel_limit_warning(s.max_nodes); !warning.empty())
      spdlog::warn("{}", warning);
    const std::weak_ptr<Impl> weak = shared_from_this();
    for (auto& acceptor : acceptors) {
      accept_loops.push_back(
          net::AcceptLoop::start(*acceptor, "rendezvous server", [weak](tcp::socket socket) {
            if (const auto self = weak.lock()) self->add_session(std::move(socket));
          }));
    }
    schedule_tick();
  }

  int port() const {
    boost::system::error_code ec;
    return acceptors.empty() ? 0 : acceptors.front()->local_endpoint(ec).port();
  }

  // Waits for connections on acceptor `i`, then takes them (take_queued).
  void add_session(tcp::socket socket) {
    const ClientId id = next_id++;
    auto connection = net::FramedConnection::create(std::move(socket), kSessionLimits);
    // A healed partition is heard from within a second (see net/tcp_timeouts.hpp); the kernel
    // gives up on the link only after the state machine would have.
    const auto& s = state.settings();
    connection->bound_tcp_timeouts(s.heartbeat_timeout + s.heartbeat_interval);
    auto route = std::make_shared<ClientId>(id);
    Session& session =
        *sessions.emplace(id, std::make_unique<Session>(connection, route, io)).first->second;
    handshaking.push_back(id);
    ++handshaking_count;
    std::weak_ptr<Impl> weak = shared_from_this();
    session.handshake_deadline.expires_after(options.handshake_timeout);
    session.handshake_deadline.async_wait([weak, id](boost::system::error_code ec) {
      auto self = weak.lock();
      if (ec || !self) return;
      const auto it = self->sessions.find(id);
      if (it == self->sessions.end() || it->second->joined) return;
      self->retire_unjoined(
          id, fmt::format("no {} within {:.1f} s",
                          self->state.settings().token.empty() ? "hello and join"
                                                               : "hello, token proof and join",
                          seconds(self->options.handshake_timeout)));
    });
    const net::FramedConnection* raw = connection.get();
    net::FramedConnection::Handlers handlers{
        [weak, route, raw](std::vector<std::string>& frames,
                           const std::optional<ProtocolError>& error) {
          auto self = weak.lock();
          if (self && self->is_current(*route, raw)) self->on_frames(*route, frames, error);
        },
        [weak, route, raw](const net::ConnectionClosed& why) {
          auto self = weak.lock();
          if (self && self->is_current(*route, raw)) self->on_closed(*route, why);
        }};
    if (options.other_protocol) {
      handlers.foreign = [weak, id](std::string first_bytes) {
        if (auto self = weak.lock()) self->hand_over(id, std::move(first_bytes));
      };
    }
    connection->start(std::move(handlers));
    if (handshaking_count > handshake_cap()) evict_oldest_stranger();
  }

  size_t handshake_cap() const {
    if (options.max_unjoined > 0) return options.max_unjoined;
    return std::max<size_t>(1024, 2 * static_cast<size_t>(state.settings().max_nodes));
  }

  // Over the cap the oldest handshake goes, not the newest: a real agent's handshake takes a
  // round trip or two, so it is never the oldest for long, while idle strangers always are.
  // Connections not yet welcomed go first: a real agent that was welcomed is one message away
  // from its join, and a flood of raw connections must not push it out in that moment.
  void evict_oldest_stranger() {
    const std::string why = fmt::format(
        "more than {} connections that have not joined; closed the oldest", handshake_cap());
    for (std::deque<ClientId>* queue : {&handshaking, &welcomed_unjoined}) {
      while (!queue->empty()) {
        const ClientId oldest = queue->front();
        queue->pop_front();
        const auto it = sessions.find(oldest);
        // Gone, joined, or (in the first queue) welcomed since: it is in the second queue.
        if (it == sessions.end() || it->second->joined ||
            (queue == &handshaking && it->second->authenticated))
          continue;
        retire_unjoined(oldest, why);
        return;
      }
    }
  }

  // The other protocol's connections come from this host or from the job's nodes: that protocol
  // (torch's store) has no authentication of its own.
  bool may_speak_other_protocol(const net::StreamConnection& connection) const {
    const auto peer = connection.peer_address();
    if (peer.is_loopback() || peer.to_string() == connection.local_address()) return true;
    return joined_addresses.count(peer.to_string()) > 0;
  }

  // The connection's first bytes were not a rendezvous frame.
  void hand_over(ClientId id, std::string first_bytes) {
    const auto it = sessions.find(id);
    if (it == sessions.end()) return;
    const std::shared_ptr<net::FramedConnection> connection = it->second->connection;
    if (!may_speak_other_protocol(*connection)) {
      drop_stranger(id,
                    "it does not speak the rendezvous protocol, and the workers' store on this "
                    "port serves only this host and the job's nodes");
      return;
    }
    it->second->handshake_deadline.cancel();
    forget(id);
    options.other_protocol(connection, std::move(first_bytes));
  }

  // An unjoined connection whose time is up: a silent one from a node of the job is the other
  // protocol's (torch 1.13's second store connection never speaks); anyone else is a stranger.
  void retire_unjoined(ClientId id, const std::string& why) {
    const auto it = sessions.find(id);
    if (it == sessions.end()) return;
    const auto& connection = *it->second->connection;
    if (options.other_protocol && connection.bytes_received() == 0 &&
        may_speak_other_protocol(connection)) {
      hand_over(id, {});
      return;
    }
    drop_stranger(id, why);
  }

  // A connection a resume replaced says nothing more about its session.
  bool is_current(ClientId id, const net::FramedConnection* connection) const {
    const auto it = sessions.find(id);
    return it != sessions.end() && it->second->connection.get() == connection;
  }

  void drop_stranger(ClientId id, const std::string& why) {
    const auto it = sessions.find(id);
    if (it == sessions.end()) return;
    strangers.record(fmt::format("dropped {}: {}", it->second->connection->peer(), why),
                     Clock::now());
    it->second->connection->close();
    forget(id);
  }

  // Welcomed: the agent may now send full-size frames (its join).
  void mark_authenticated(ClientId id) {
    const auto it = sessions.find(id);
    if (it == sessions.end() || it->second->authenticated) return;
    it->second->authenticated = true;
    it->second->connection->set_max_frame(Limits::kMaxClientFrame);
    if (!it->second->joined) welcomed_unjoined.push_back(id);
  }

  // The handshake ends with a join the state machine took, not with the welcome: a welcomed
  // connection that never joins (a job without a token welcomes anyone) is still a stranger's,
  // capped and timed out like any handshake. From now on its liveness is the state machine's
  // heartbeat deadline. The queue forgets joined connections lazily.
  void mark_joined(ClientId id) {
    const auto it = sessions.find(id);
    if (it == sessions.end() || it->second->joined) return;
    it->second->joined = true;
    it->second->handshake_deadline.cancel();
    --handshaking_count;
    if (!it->second->resume_key.empty()) resume_keys.emplace(it->second->resume_key, id);
    joined_addresses.insert(it->second->connection->peer_address().to_string());
    for (std::deque<ClientId>* queue : {&handshaking, &welcomed_unjoined}) {
      if (queue->size() <= 2 * handshaking_count + 1024) continue;
      std::erase_if(*queue, [this](ClientId h) {
        const auto s = sessions.find(h);
        return s == sessions.end() || s->second->joined;
      });
    }
  }

  void on_frames(ClientId from, std::vector<std::string>& frames,
                 std::optional<ProtocolError> error) {
    for (const std::string& frame : frames) {
      auto decoded = decode_client_message(frame);
      if (auto* bad = std::get_if<ProtocolError>(&decoded)) {
        error = std::move(*bad);
        break;
      }
      const ClientMessage& message = std::get<ClientMessage>(decoded);
      Session& session = *sessions.at(from);
      if (const auto* hello = std::get_if<Hello>(&message)) session.resume_key = hello->session;
      if (const auto* resume = std::get_if<Resume>(&message)) {
        const auto resumed = resume_session(from, *resume);
        if (!resumed) return;  // refused; the connection closes
        from = *resumed;       // the rest of the frames belong to the resumed session
        continue;
      }
      if (const auto* heartbeat = std::get_if<Heartbeat>(&message)) {
        if (heartbeat->received > session.sent) {
          error = ProtocolError{"bad_message",
                                fmt::format("a heartbeat confirms {} messages of the {} sent",
                                            heartbeat->received, session.sent)};
          break;
        }
        acknowledged(session, heartbeat->received);
      }
      if (session.authenticated && sequenced(message)) ++session.received;
      dispatch(state.on_message(from, message, now()));
      const auto it = sessions.find(from);
      if (it == sessions.end() || !it->second->connection->is_open()) return;  // refused
      if (!it->second->joined && state.has_joined(from)) mark_joined(from);
    }
    if (error) {
      const auto it = sessions.find(from);
      if (it != sessions.end()) {
        const auto& connection = it->second->connection;
        note_dropped(*it->second, error->message);
        connection->send(std::make_shared<const std::string>(
            encode_frame(encode(ServerMessage{ErrorReply{error->code, error->message}}))));
        connection->close_after_sending();
      }
    }
  }

  // Moves the session the resume names to connection `from`'s session, which ends, and sends
  // the agent what it missed; returns the resumed session's id, or nothing when refused.
  std::optional<ClientId> resume_session(ClientId from, const Resume& resume) {
    Session& fresh = *sessions.at(from);
    auto refuse = [&](const char* code, const std::string& text) -> std::optional<ClientId> {
      note_dropped(fresh, text);
      fresh.connection->send(std::make_shared<const std::string>(
          encode_frame(encode(ServerMessage{ErrorReply{code, text}}))));
      fresh.connection->close_after_sending();
      return std::nullopt;
    };
    if (!fresh.authenticated || fresh.joined)
      return refuse("protocol_order", "'resume' is only allowed right after the welcome");
    const auto key = resume_keys.find(resume.session);
    if (key == resume_keys.end() || key->second == from) {
      return refuse("unknown_session",
                    "no session to resume: the agent was declared lost or has left, or the "
                    "server restarted");
    }
    const ClientId id = key->second;
    Session& session = *sessions.at(id);
    if (!session.resumable || resume.received > session.sent ||
        resume.received + session.unacked.size() < session.sent) {
      return refuse("cannot_resume",
                    fmt::format("the session cannot resume at message {}: {} sent, {} kept",
                                resume.received, session.sent, session.unacked.size()));
    }
    // The old connection is closed without a word: its FIN may still be on its way out of a
    // partition, and the session lives on here.
    const std::string old_peer = session.connection->peer();
    session.connection->close();
    session.connection = std::move(fresh.connection);
    *fresh.route = id;
    acknowledged(session, resume.received);
    session.connection->send(std::make_shared<const std::string>(
        encode_frame(encode(ServerMessage{Resumed{session.received}}))));
    for (const auto& frame : session.unacked) session.connection->send(frame);
    spdlog::info(
        "rendezvous server: {} resumed its session on a new connection from {} ({} "
        "message(s) sent again)",
        old_peer, session.connection->peer(), session.unacked.size());
    forget(from);  // the fresh connection's own session: a handshake that is over
    dispatch(state.on_message(id, Heartbeat{resume.received}, now()));  // heard from just now
    return id;
  }

  // The agent received everything up to `received`: no need to keep it.
  static void acknowledged(Session& session, uint64_t received) {
    uint64_t first_kept = session.sent - session.unacked.size() + 1;
    while (!session.unacked.empty() && first_kept <= received) {
      session.unacked_bytes -= session.unacked.front()->size();
      session.unacked.pop_front();
      ++first_kept;
    }
  }

  // Sent to an agent: sequenced messages are kept for a resume until confirmed.
  static void keep_for_resume(Session& session, const std::shared_ptr<const std::string>& frame) {
    ++session.sent;
    if (!session.resumable) return;
    session.unacked.push_back(frame);
    session.unacked_bytes += frame->size();
    if (session.unacked_bytes > kMaxUnackedBytes) {
      session.resumable = false;
      session.unacked.clear();
      session.unacked_bytes = 0;
    }
  }

  // Agents are named in the log at once; strangers go through the rate-limited log.
  void note_dropped(const Session& session, const std::string& why) {
    if (session.joined)
      spdlog::warn("rendezvous server: dropping {}: {}", session.connection->peer(), why);
    else
      strangers.record(fmt::format("dropped {}: {}", session.connection->peer(), why),
                       Clock::now());
  }

  // The connection ended by itself: the peer hung up, failed, did not read, or was sent its
  // last message.
  void on_closed(ClientId id, const net::ConnectionClosed& why) {
    const auto it = sessions.find(id);
    if (it == sessions.end()) return;
    using Cause = net::ConnectionClosed::Cause;
    if (why.cause == Cause::kQueueFull) note_dropped(*it->second, why.text());
    // An agent with another token hangs up here: it checks the server's proof first.
    const bool peer_left = why.cause == Cause::kPeerClosed || why.cause == Cause::kReadError;
    if (peer_left && !it->second->authenticated && state.awaiting_proof(id)) {
      strangers.record(fmt::format("{} hung up instead of proving the token: it has a different "
                                   "token, or is not an npu_run agent",
                                   it->second->connection->peer()),
                       Clock::now());
    }
    forget(id);
  }

  void forget(ClientId id) {
    const auto it = sessions.find(id);
    if (it == sessions.end()) return;
    if (!it->second->joined) --handshaking_count;
    if (const auto key = resume_keys.find(it->second->resume_key);
        key != resume_keys.end() && key->second == id)
      resume_keys.erase(key);
    sessions.erase(it);
    dispatch(state.on_disconnect(id, now()));
    check_done();
  }

  void dispatch(const std::vector<Outgoing>& outgoing) {
    for (const Outgoing& o : outgoing) {
      if (const auto* assigned = std::get_if<Assigned>(&o.message);
          assigned != nullptr && assigned->round != last_formed_round) {
        last_formed_round = assigned->round;
        if (options.round_formed) options.round_formed(assigned->round);
      }
      log(o);
      if (std::holds_alternative<Welcome>(o.message)) {
        for (ClientId id : o.to) mark_authenticated(id);
      }
      // A heartbeat's answer only says "alive" and how much arrived: while anything else waits
      // it says nothing new, and a peer that sends heartbeats without reading cannot pile them
      // up. Each says its recipient's count.
      if (std::holds_alternative<HeartbeatAck>(o.message)) {
        for (ClientId id : o.to) {
          const auto it = sessions.find(id);
          if (it == sessions.end()) continue;
          it->second->connection->send_unless_busy(std::make_shared<const std::string>(
              encode_frame(encode(ServerMessage{HeartbeatAck{it->second->received}}))));
        }
        continue;
      }
      // Serialized once; every recipient's queue shares the same bytes.
      auto frame = std::make_shared<const std::string>(encode_frame(encode(o.message)));
      const bool kept = sequenced(o.message);
      for (ClientId id : o.to) {
        const auto it = sessions.find(id);
        if (it == sessions.end()) continue;
        if (kept) keep_for_resume(*it->second, frame);
        const auto& connection = it->second->connection;
        connection->send(frame);
        if (o.close_after) connection->close_after_sending();
      }
    }
    if (state.phase() == RendezvousState::Phase::kFinished && !finished) {
      finished = true;
      barrier_timer.expires_after(options.exit_barrier_timeout);
      barrier_timer.async_wait([weak = std::weak_ptr<Impl>(shared_from_this())](
                                   boost::system::error_code ec) {
        auto self = weak.lock();
        if (ec || !self) return;
        spdlog::warn(
            "rendezvous server: {} agent(s) still connected {:.0f} s after the job ended; closing",
            self->sessions.size(),
            std::chrono::duration<double>(self->options.exit_barrier_timeout).count());
        self->shutdown();
      });
      check_done();
    }
  }

  void log(const Outgoing& o) {
    log_milestone(o.message, state.settings().max_restarts);
    const auto* refusal = std::get_if<ErrorReply>(&o.message);
    if (refusal == nullptr) return;
    const auto it = o.to.size() == 1 ? sessions.find(o.to.front()) : sessions.end();
    if (it == sessions.end()) {
      spdlog::warn("rendezvous server: refused an agent: {}", refusal->message);
    } else if (it->second->joined) {
      spdlog::warn("rendezvous server: refused {}: {}", it->second->connection->peer(),
                   refusal->message);
    } else {
      strangers.record(
          fmt::format("refused {}: {}", it->second->connection->peer(), refusal->message),
          Clock::now());
    }
  }

  void schedule_tick() {
    tick_timer.expires_after(std::chrono::milliseconds(250));
    tick_timer.async_wait(
        [weak = std::weak_ptr<Impl>(shared_from_this())](boost::system::error_code ec) {
          auto self = weak.lock();
          if (ec || !self || self->stopped) return;
          self->strangers.flush(Clock::now());
          self->dispatch(self->state.on_tick(now()));
          self->schedule_tick();
        });
  }

  void check_done() {
    if (finished && sessions.empty()) shutdown();
  }

  void shutdown() {
    if (stopped) return;
    stopped = true;
    strangers.flush(Clock::now(), true);  // what was only counted so far
    boost::system::error_code ignored;
    for (auto& loop : accept_loops) loop->stop();
    for (auto& acceptor : acceptors) acceptor->close(ignored);
    tick_timer.cancel();
    barrier_timer.cancel();
    // Every agent is lost to the state machine as if it had hung up (forget() edits `sessions`).
    std::vector<ClientId> remaining;
    for (const auto& [id, session] : sessions) remaining.push_back(id);
    for (ClientId id : remaining) {
      if (const auto it = sessions.find(id); it != sessions.end()) it->second->connection->close();
      forget(id);
    }
    if (on_done) {
      const Decision decision = state.final_decision().value_or(Decision{
          state.round(), Action::kFinish, state.restart_count(), kExitRendezvous, std::nullopt});
      auto handler = std::move(on_done);
      on_done = nullptr;
      asio::post(io, [handler = std::move(handler), decision] { handler(decision); });
    }
  }

  asio::io_context& io;
  ServerOptions options;
  RendezvousState state;
  // One per served address (the first decides the port), each with its accept-retry timer.
  std::vector<std::unique_ptr<tcp::acceptor>> acceptors;
  std::vector<std::shared_ptr<net::AcceptLoop>> accept_loops;
  std::vector<std::string> served;
  asio::steady_timer tick_timer;
  asio::steady_timer barrier_timer;
  std::unordered_map<ClientId, std::unique_ptr<Session>> sessions;
  // The resume key of every joined session (the first with a key keeps it).
  std::unordered_map<std::string, ClientId> resume_keys;
  // Connections in their handshake, oldest first (welcomed or closed ones are skipped lazily).
  std::deque<ClientId> handshaking;
  // Welcomed connections that have not joined yet, oldest first (evicted after `handshaking`).
  std::deque<ClientId> welcomed_unjoined;
  // Where agents joined from, for as long as the server runs: the workers' store on this port
  // serves these addresses (ServerOptions::other_protocol).
  std::unordered_set<std::string> joined_addresses;
  uint64_t last_formed_round = 0;
  size_t handshaking_count = 0;
  StrangerLog strangers{std::chrono::seconds(5)};
  ClientId next_id = 1;
  int listen_backlog = 0;
  bool finished = false;
  bool stopped = false;
  DoneHandler on_done;
};

RendezvousServer::RendezvousServer(asio::io_context& io, JobSettings settings,
                                   ServerOptions options)
    : impl_(std::make_shared<Impl>(io, std::move(settings), std::move(options))) {
  impl_->bind();
}

RendezvousServer::~RendezvousServer() {
  impl_->on_done = nullptr;
  impl_->shutdown();
}

int RendezvousServer::port() const {
  return impl_->port();
}
int RendezvousServer::backlog() const {
  return impl_->listen_backlog;
}
void RendezvousServer::start(DoneHandler on_done) {
  impl_->start(std::move(on_done));
}
void RendezvousServer::stop() {
  impl_->shutdown();
}
bool RendezvousServer::job_finished() const {
  return impl_->finished;
}
bool RendezvousServer::round_in_progress() const {
  const auto phase = impl_->state.phase();
  return phase == RendezvousState::Phase::kRunning || phase == RendezvousState::Phase::kStopping;
}
size_t RendezvousServer::connections() const {
  return impl_->sessions.size();
}

}  // namespace npu_run::rdzv
