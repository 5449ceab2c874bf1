#include "rendezvous/server/server_admission.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>

namespace npu_run::rdzv {

Admission::Rules Admission::rules_for(const ServerOptions& options, const JobSettings& job) {
  const size_t cap = options.max_unjoined > 0
                         ? options.max_unjoined
                         : std::max<size_t>(1024, 2 * static_cast<size_t>(job.max_nodes));
  return Rules{cap, options.handshake_timeout, !job.token.empty()};
}

void Admission::connected(ClientId id) {
  handshaking_.push_back(id);
  if (++strangers_ <= rules_.cap) return;
  if (const auto oldest = oldest_stranger()) {
    retire(*oldest, fmt::format("more than {} connections that have not joined; closed the oldest",
                                rules_.cap));
  }
}

void Admission::welcomed(ClientId id) {
  Session* session = sessions_.find(id);
  if (session == nullptr || session->authenticated) return;
  session->authenticated = true;
  session->connection->set_max_frame(Limits::kMaxClientFrame);
  if (!session->joined) welcomed_unjoined_.push_back(id);
}

// The handshake ends with a join the state machine took, not with the welcome: a welcomed
// connection that never joins (a job without a token welcomes anyone) is still a stranger's,
// capped and timed out like any handshake. From now on its liveness is the state machine's
// heartbeat deadline. The queues forget joined connections lazily: trimmed here once they are
// mostly such.
void Admission::joined(ClientId id) {
  Session* session = sessions_.find(id);
  if (session == nullptr || session->joined) return;
  session->joined = true;
  session->handshake_deadline.cancel();
  sessions_.remember_resume_key(id);
  switch_.joined_from(session->connection->peer_address());
  --strangers_;
  for (std::deque<ClientId>* queue : {&handshaking_, &welcomed_unjoined_}) {
    if (queue->size() <= 2 * strangers_ + 1024) continue;
    std::erase_if(*queue, [this](ClientId h) {
      const Session* s = sessions_.find(h);
      return s == nullptr || s->joined;
    });
  }
}

void Admission::left(const Session& session) {
  if (!session.joined) --strangers_;
}

// The oldest handshake goes, not the newest: a real agent's handshake takes a round trip or
// two, so it is never the oldest for long, while idle strangers always are. Connections not yet
// welcomed go first: a real agent that was welcomed is one message away from its join, and a
// flood of raw connections must not push it out in that moment.
std::optional<ClientId> Admission::oldest_stranger() {
  for (std::deque<ClientId>* queue : {&handshaking_, &welcomed_unjoined_}) {
    while (!queue->empty()) {
      const ClientId oldest = queue->front();
      queue->pop_front();
      const Session* session = sessions_.find(oldest);
      // Gone, joined, or (in the first queue) welcomed since: it is in the second queue.
      if (session == nullptr || session->joined ||
          (queue == &handshaking_ && session->authenticated))
        continue;
      return oldest;
    }
  }
  return std::nullopt;
}

void Admission::handshake_over(ClientId id) {
  const Session* session = sessions_.find(id);
  if (session == nullptr || session->joined) return;
  retire(id, fmt::format("no {} within {:.1f} s",
                         rules_.token ? "hello, token proof and join" : "hello and join",
                         std::chrono::duration<double>(rules_.handshake_timeout).count()));
}

// A silent one from a node of the job is the other protocol's (torch 1.13's second store
// connection never speaks); anyone else is a stranger.
void Admission::retire(ClientId id, const std::string& why) {
  const Session* session = sessions_.find(id);
  if (session == nullptr) return;
  if (switch_.takes_silent(*session->connection)) {
    hand_over(id, {});
    return;
  }
  drop_stranger(id, why);
}

void Admission::hand_over(ClientId id, std::string first_bytes) {
  Session* session = sessions_.find(id);
  if (session == nullptr) return;
  const std::shared_ptr<net::FramedConnection> connection = session->connection;
  if (const std::string refusal = switch_.refusal(*connection); !refusal.empty()) {
    drop_stranger(id, refusal);
    return;
  }
  session->handshake_deadline.cancel();
  forget_(id);
  switch_.hand_over(connection, std::move(first_bytes));
}

void Admission::drop_stranger(ClientId id, const std::string& why) {
  const Session* session = sessions_.find(id);
  if (session == nullptr) return;
  note_stranger(fmt::format("dropped {}: {}", session->connection->peer(), why));
  session->connection->close();
  forget_(id);
}

void Admission::note_dropped(const Session& session, const std::string& why) {
  if (session.joined)
    spdlog::warn("rendezvous server: dropping {}: {}", session.connection->peer(), why);
  else
    note_stranger(fmt::format("dropped {}: {}", session.connection->peer(), why));
}

void Admission::note_closed(const Session& session, const net::ConnectionClosed& why,
                            bool awaited_proof) {
  using Cause = net::ConnectionClosed::Cause;
  if (why.cause == Cause::kQueueFull) note_dropped(session, why.text());
  // An agent with another token hangs up here: it checks the server's proof first.
  const bool peer_left = why.cause == Cause::kPeerClosed || why.cause == Cause::kReadError;
  if (peer_left && !session.authenticated && awaited_proof) {
    note_stranger(fmt::format(
        "{} hung up instead of proving the token: it has a different token, or is not an "
        "npu_run agent",
        session.connection->peer()));
  }
}

void Admission::note_refused(const Session* session, const std::string& message) {
  if (session == nullptr) {
    spdlog::warn("rendezvous server: refused an agent: {}", message);
  } else if (session->joined) {
    spdlog::warn("rendezvous server: refused {}: {}", session->connection->peer(), message);
  } else {
    note_stranger(fmt::format("refused {}: {}", session->connection->peer(), message));
  }
}

void Admission::note_stranger(const std::string& what) {
  log_.record(what, StrangerLog::Clock::now());
}

void Admission::flush(bool all) {
  log_.flush(StrangerLog::Clock::now(), all);
}

}  // namespace npu_run::rdzv
