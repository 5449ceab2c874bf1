#include "rendezvous/server/server_sessions.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "rendezvous/protocol/protocol.hpp"

namespace npu_run::rdzv {

namespace {

// What a session keeps for a resume: as much as may wait to be sent. The frames are shared with
// the other sessions' queues; an agent that confirms nothing for that long cannot resume.
constexpr size_t kMaxUnackedBytes = kSessionLimits.max_queued_bytes;

}  // namespace

std::shared_ptr<const std::string> frame_of(const ServerMessage& message) {
  return std::make_shared<const std::string>(encode_frame(encode(message)));
}

std::optional<ProtocolError> Session::take(const ClientMessage& message) {
  if (const auto* hello = std::get_if<Hello>(&message)) resume_key = hello->session;
  if (const auto* heartbeat = std::get_if<Heartbeat>(&message)) {
    if (heartbeat->received > sent) {
      return ProtocolError{"bad_message",
                           fmt::format("a heartbeat confirms {} messages of the {} sent",
                                       heartbeat->received, sent)};
    }
    acknowledged(heartbeat->received);
  }
  if (authenticated && sequenced(message)) ++received;
  return std::nullopt;
}

void Session::keep_for_resume(const std::shared_ptr<const std::string>& frame) {
  ++sent;
  if (!resumable) return;
  unacked.push_back(frame);
  unacked_bytes += frame->size();
  if (unacked_bytes > kMaxUnackedBytes) {
    resumable = false;
    unacked.clear();
    unacked_bytes = 0;
  }
}

void Session::acknowledged(uint64_t confirmed) {
  uint64_t first_kept = sent - unacked.size() + 1;
  while (!unacked.empty() && first_kept <= confirmed) {
    unacked_bytes -= unacked.front()->size();
    unacked.pop_front();
    ++first_kept;
  }
}

Session& Sessions::add(ClientId id, std::shared_ptr<net::FramedConnection> connection,
                       boost::asio::io_context& io) {
  auto route = std::make_shared<ClientId>(id);
  return *sessions_.emplace(id, std::make_unique<Session>(std::move(connection), route, io))
              .first->second;
}

Session* Sessions::find(ClientId id) {
  const auto it = sessions_.find(id);
  return it == sessions_.end() ? nullptr : it->second.get();
}

const Session* Sessions::find(ClientId id) const {
  const auto it = sessions_.find(id);
  return it == sessions_.end() ? nullptr : it->second.get();
}

void Sessions::erase(ClientId id) {
  const auto it = sessions_.find(id);
  if (it == sessions_.end()) return;
  if (const auto key = resume_keys_.find(it->second->resume_key);
      key != resume_keys_.end() && key->second == id)
    resume_keys_.erase(key);
  sessions_.erase(it);
}

std::vector<ClientId> Sessions::ids() const {
  std::vector<ClientId> ids;
  ids.reserve(sessions_.size());
  for (const auto& [id, session] : sessions_) ids.push_back(id);
  return ids;
}

void Sessions::remember_resume_key(ClientId id) {
  const Session* session = find(id);
  if (session != nullptr && !session->resume_key.empty())
    resume_keys_.emplace(session->resume_key, id);
}

bool Sessions::is_current(ClientId id, const net::FramedConnection* connection) const {
  const Session* session = find(id);
  return session != nullptr && session->connection.get() == connection;
}

void Sessions::send(const Outgoing& o) {
  // A heartbeat's answer only says "alive" and how much arrived: while anything else waits it
  // says nothing new, and a peer that sends heartbeats without reading cannot pile them up.
  // Each says its recipient's count.
  if (std::holds_alternative<HeartbeatAck>(o.message)) {
    for (ClientId id : o.to) {
      if (Session* session = find(id))
        session->connection->send_unless_busy(frame_of(HeartbeatAck{session->received}));
    }
    return;
  }
  // Serialized once; every recipient's queue shares the same bytes.
  const auto frame = frame_of(o.message);
  const bool kept = sequenced(o.message);
  for (ClientId id : o.to) {
    Session* session = find(id);
    if (session == nullptr) continue;
    if (kept) session->keep_for_resume(frame);
    session->connection->send(frame);
    if (o.close_after) session->connection->close_after_sending();
  }
}

std::variant<ClientId, ResumeRefused> Sessions::resume(ClientId from, const Resume& resume) {
  Session& fresh = *find(from);
  if (!fresh.authenticated || fresh.joined)
    return ResumeRefused{"protocol_order", "'resume' is only allowed right after the welcome"};
  const auto key = resume_keys_.find(resume.session);
  if (key == resume_keys_.end() || key->second == from) {
    return ResumeRefused{"unknown_session",
                         "no session to resume: the agent was declared lost or has left, or the "
                         "server restarted"};
  }
  const ClientId id = key->second;
  Session& session = *find(id);
  if (!session.resumable || resume.received > session.sent ||
      resume.received + session.unacked.size() < session.sent) {
    return ResumeRefused{"cannot_resume",
                         fmt::format("the session cannot resume at message {}: {} sent, {} kept",
                                     resume.received, session.sent, session.unacked.size())};
  }
  // The old connection is closed without a word: its FIN may still be on its way out of a
  // partition, and the session lives on here.
  const std::string old_peer = session.connection->peer();
  session.connection->close();
  session.connection = std::move(fresh.connection);
  *fresh.route = id;
  session.acknowledged(resume.received);
  session.connection->send(frame_of(Resumed{session.received}));
  for (const auto& frame : session.unacked) session.connection->send(frame);
  spdlog::info(
      "rendezvous server: {} resumed its session on a new connection from {} ({} "
      "message(s) sent again)",
      old_peer, session.connection->peer(), session.unacked.size());
  return id;
}

}  // namespace npu_run::rdzv
