// The rendezvous server's core: it drives the pure state machine (state.hpp) from the agents'
// frames, its ticks and their disconnects, and sends what it answers. The rest is in units of
// their own: the listening sockets (server_listeners), sessions and their resume
// (server_sessions), its clock (server_ticks), who may connect before joining
// (server_admission) and the other protocol sharing the port (server_protocol_switch).
#include "rendezvous/server/server.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <utility>
#include <vector>

#include "net/framed_connection.hpp"
#include "rendezvous/protocol/protocol.hpp"
#include "rendezvous/server/server_admission.hpp"
#include "rendezvous/server/server_listeners.hpp"
#include "rendezvous/server/server_log.hpp"
#include "rendezvous/server/server_sessions.hpp"
#include "rendezvous/server/server_ticks.hpp"

namespace npu_run::rdzv {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;

struct RendezvousServer::Impl : std::enable_shared_from_this<Impl> {
  Impl(asio::io_context& io_context, JobSettings job, ServerOptions opts)
      : io(io_context),
        options(std::move(opts)),
        state(std::move(job), now()),
        listeners(io_context),
        admission(sessions, Admission::rules_for(options, state.settings()), options.other_protocol,
                  [this](ClientId id) { forget(id); }),
        ticks(io_context, state.settings().heartbeat_interval, state.settings().heartbeat_timeout),
        barrier_timer(io_context) {
    if (options.resume) state.resume(*options.resume);
    memory_stamp = {state.round(), state.phase()};
  }

  void start(DoneHandler handler) {
    on_done = std::move(handler);
    const auto& s = state.settings();
    spdlog::info("rendezvous server on {} for {} node{} (run id '{}', backlog {})",
                 fmt::join(listeners.endpoints(), " and "), s.max_nodes,
                 s.max_nodes == 1 ? "" : "s", s.run_id, listeners.backlog());
    if (const std::string warning = kernel_limit_warning(s.max_nodes); !warning.empty())
      spdlog::warn("{}", warning);
    const std::weak_ptr<Impl> weak = shared_from_this();
    listeners.start([weak](tcp::socket socket) {
      if (const auto self = weak.lock()) self->add_session(std::move(socket));
    });
    ticks.start([weak] {
      const auto self = weak.lock();
      if (!self || self->stopped) return;
      self->admission.flush();
      self->dispatch(self->state.on_tick(now()));
    });
  }

  // ---- connections ----

  void add_session(tcp::socket socket) {
    const ClientId id = next_id++;
    auto connection = net::FramedConnection::create(std::move(socket), kSessionLimits);
    // A healed partition is heard from within a second (see net/tcp_timeouts.hpp); the kernel
    // gives up on the link only after the state machine would have.
    const auto& s = state.settings();
    connection->bound_tcp_timeouts(s.heartbeat_timeout + s.heartbeat_interval);
    Session& session = sessions.add(id, connection, io);
    watch_handshake(id, session);
    connection->start(handlers_for(id, session));
    admission.connected(id);
  }

  // A connection must say hello, prove the token (when the job has one) and join in time.
  void watch_handshake(ClientId id, Session& session) {
    session.handshake_deadline.expires_after(options.handshake_timeout);
    session.handshake_deadline.async_wait(
        [weak = weak_from_this(), id](boost::system::error_code ec) {
          if (auto self = weak.lock(); self && !ec) self->admission.handshake_over(id);
        });
  }

  // Frames and the end of the connection go to the session it serves now: its own, or the one
  // it resumed (`route`); a connection a resume replaced is not heard any more.
  net::FramedConnection::Handlers handlers_for(ClientId id, const Session& session) {
    const std::weak_ptr<Impl> weak = shared_from_this();
    const std::shared_ptr<ClientId> route = session.route;
    const net::FramedConnection* raw = session.connection.get();
    net::FramedConnection::Handlers handlers{
        [weak, route, raw](std::vector<std::string>& frames,
                           const std::optional<ProtocolError>& error) {
          auto self = weak.lock();
          if (self && self->sessions.is_current(*route, raw))
            self->on_frames(*route, frames, error);
        },
        [weak, route, raw](const net::ConnectionClosed& why) {
          auto self = weak.lock();
          if (self && self->sessions.is_current(*route, raw)) self->on_closed(*route, why);
        }};
    if (admission.serves_other_protocol()) {
      handlers.foreign = [weak, id](std::string first_bytes) {
        if (auto self = weak.lock()) self->admission.hand_over(id, std::move(first_bytes));
      };
    }
    return handlers;
  }

  // Sends `error` and closes the connection once it has gone.
  void refuse(Session& session, const char* code, const std::string& text) {
    admission.note_dropped(session, text);
    session.connection->send(frame_of(ServerMessage{ErrorReply{code, text}}));
    session.connection->close_after_sending();
  }

  // ---- the state machine ----

  void on_frames(ClientId from, std::vector<std::string>& frames,
                 std::optional<ProtocolError> error) {
    for (const std::string& frame : frames) {
      auto decoded = decode_client_message(frame);
      if (auto* bad = std::get_if<ProtocolError>(&decoded)) {
        error = std::move(*bad);
        break;
      }
      const ClientMessage& message = std::get<ClientMessage>(decoded);
      if (const auto* resume = std::get_if<Resume>(&message)) {
        const auto resumed = resume_session(from, *resume);
        if (!resumed) return;  // refused; the connection closes
        from = *resumed;       // the rest of the frames belong to the resumed session
        continue;
      }
      if (auto broken = sessions.find(from)->take(message)) {
        error = std::move(broken);
        break;
      }
      dispatch(state.on_message(from, message, now()));
      Session* session = sessions.find(from);
      if (session == nullptr || !session->connection->is_open()) return;  // refused
      if (!session->joined && state.has_joined(from)) admission.joined(from);
    }
    if (Session* session = error ? sessions.find(from) : nullptr)
      refuse(*session, error->code.c_str(), error->message);
  }

  // The session the resume names continues on connection `from`, whose own session ends;
  // nothing when refused.
  std::optional<ClientId> resume_session(ClientId from, const Resume& resume) {
    const auto resumed = sessions.resume(from, resume);
    if (const auto* refused = std::get_if<ResumeRefused>(&resumed)) {
      refuse(*sessions.find(from), refused->code, refused->text);
      return std::nullopt;
    }
    const ClientId id = std::get<ClientId>(resumed);
    forget(from);  // the fresh connection's own session: a handshake that is over
    dispatch(state.on_message(id, Heartbeat{resume.received}, now()));  // heard from just now
    return id;
  }

  // The connection ended by itself: the peer hung up, failed, did not read, or was sent its
  // last message.
  void on_closed(ClientId id, const net::ConnectionClosed& why) {
    const Session* session = sessions.find(id);
    if (session == nullptr) return;
    admission.note_closed(*session, why, state.awaiting_proof(id));
    forget(id);
  }

  void forget(ClientId id) {
    const Session* session = sessions.find(id);
    if (session == nullptr) return;
    admission.left(*session);
    sessions.erase(id);
    if (holding_departures && !finished) {
      held_departures.push_back(id);
      return;
    }
    dispatch(state.on_disconnect(id, now()));
    check_done();
  }

  // Once the job is decided there is nothing to hold for: the exit barrier counts every
  // agent that hangs up.
  void hold_departures(bool hold) {
    holding_departures = hold && !finished;
    if (holding_departures) return;
    for (const ClientId id : std::exchange(held_departures, {})) {
      dispatch(state.on_disconnect(id, now()));
      check_done();
    }
  }

  void dispatch(const std::vector<Outgoing>& outgoing) {
    for (const TakenOut& t : state.take_taken_out()) {
      spdlog::warn("node {} ({}, {}) is taken out of the job ({}): {}", t.node_rank, t.host, t.addr,
                   t.reason, t.evidence);
      if (options.taken_out) options.taken_out(t);
    }
    for (const Outgoing& o : outgoing) send(o);
    note_memory();
    if (auto blame = state.take_new_blame()) spdlog::info("{}", blame->sentence);
    if (auto straggler = state.take_new_straggler())
      spdlog::warn("{}", announcement(*straggler, state.settings().straggler.mode));
    if (state.phase() == RendezvousState::Phase::kFinished && !finished) {
      finished = true;
      start_exit_barrier();
      hold_departures(false);
      check_done();
    }
  }

  // The job's memory changes only when a round forms, is stopped or is decided: each of these
  // moves the round or the phase, which is all that is compared per event.
  void note_memory() {
    const std::pair stamp{state.round(), state.phase()};
    if (stamp == memory_stamp) return;
    memory_stamp = stamp;
    if (options.memory_changed) options.memory_changed(state.memory());
  }

  void send(const Outgoing& o) {
    if (const auto* assigned = std::get_if<Assigned>(&o.message);
        assigned != nullptr && assigned->round != last_formed_round) {
      last_formed_round = assigned->round;
      if (options.round_formed) options.round_formed(assigned->round);
    }
    log(o);
    if (std::holds_alternative<Welcome>(o.message)) {
      for (ClientId id : o.to) admission.welcomed(id);
    }
    sessions.send(o);
  }

  void log(const Outgoing& o) {
    log_milestone(o.message, state.settings().max_restarts);
    const auto* refusal = std::get_if<ErrorReply>(&o.message);
    // The health gate's end of the job is logged by every agent, node 0's too.
    if (refusal != nullptr && refusal->code != "health_gate")
      admission.note_refused(o.to.size() == 1 ? sessions.find(o.to.front()) : nullptr,
                             refusal->message);
  }

  // After the job has ended, every agent has this long to hear it and disconnect.
  void start_exit_barrier() {
    barrier_timer.expires_after(options.exit_barrier_timeout);
    barrier_timer.async_wait([weak = weak_from_this()](boost::system::error_code ec) {
      auto self = weak.lock();
      if (ec || !self) return;
      spdlog::warn(
          "rendezvous server: {} agent(s) still connected {:.0f} s after the job ended; closing",
          self->sessions.size(),
          std::chrono::duration<double>(self->options.exit_barrier_timeout).count());
      self->shutdown();
    });
  }

  void check_done() {
    if (finished && sessions.empty()) shutdown();
  }

  void shutdown() {
    if (stopped) return;
    stopped = true;
    holding_departures = false;
    held_departures.clear();
    // The job's records once every agent has heard the decision and gone (or the barrier ran
    // out): writing a big job's timeline takes seconds, which no other node waits for.
    if (finished && options.job_ended) options.job_ended(state);
    admission.flush(true);  // what was only counted so far
    listeners.stop();
    ticks.cancel();
    barrier_timer.cancel();
    // Every agent is lost to the state machine as if it had hung up (forget() edits `sessions`).
    for (ClientId id : sessions.ids()) {
      if (const Session* session = sessions.find(id)) session->connection->close();
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
  Listeners listeners;
  Sessions sessions;
  Admission admission;
  ServerTicks ticks;
  asio::steady_timer barrier_timer;
  uint64_t last_formed_round = 0;
  std::pair<uint64_t, RendezvousState::Phase> memory_stamp;
  ClientId next_id = 1;
  bool finished = false;
  bool stopped = false;
  bool holding_departures = false;
  std::vector<ClientId> held_departures;  // their connections closed while held
  DoneHandler on_done;
};

RendezvousServer::RendezvousServer(asio::io_context& io, JobSettings settings,
                                   ServerOptions options)
    : impl_(std::make_shared<Impl>(io, std::move(settings), std::move(options))) {
  impl_->listeners.bind(impl_->options);
}

RendezvousServer::~RendezvousServer() {
  impl_->on_done = nullptr;
  impl_->shutdown();
}

void RendezvousServer::on_job_ended(std::function<void(const RendezvousState&)> ended) {
  impl_->options.job_ended = std::move(ended);
}

const RendezvousState& RendezvousServer::state() const {
  return impl_->state;
}

void RendezvousServer::hold_departures(bool hold) {
  if (!impl_->stopped) impl_->hold_departures(hold);
}

size_t RendezvousServer::clients_reaching_etcd(std::chrono::steady_clock::time_point since) const {
  return impl_->state.clients_reaching_etcd(since);
}

int RendezvousServer::port() const {
  return impl_->listeners.port();
}
int RendezvousServer::backlog() const {
  return impl_->listeners.backlog();
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
