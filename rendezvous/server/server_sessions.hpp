// The rendezvous server's sessions: one per agent connection, kept across a partition by a
// resume on a new connection. A session keeps the sequenced messages it sent (messages.hpp)
// until the agent confirms them, so a resumed session is sent what it missed; a joined session
// is found again by the resume key of its hello.
#pragma once

#include <boost/asio/steady_timer.hpp>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <variant>
#include <vector>

#include "net/framed_connection.hpp"
#include "rendezvous/protocol/messages.hpp"
#include "rendezvous/protocol/protocol.hpp"
#include "rendezvous/state/state.hpp"

namespace npu_run::rdzv {

// Agents' frames are small: a 1 KiB read buffer keeps 16k idle sessions cheap. What waits to be
// sent is one frame of any allowed size plus a little: an agent that reads never comes near it.
inline constexpr net::ConnectionLimits kSessionLimits{
    Limits::kMaxHandshakeFrame, 1024, Limits::kMaxServerFrame + size_t{1024} * 1024};

struct Session {
  Session(std::shared_ptr<net::FramedConnection> c, std::shared_ptr<ClientId> r,
          boost::asio::io_context& io)
      : connection(std::move(c)), route(std::move(r)), handshake_deadline(io) {}

  // What the session learns from the agent's `message` before the state machine sees it: the
  // hello's resume key, a heartbeat's confirmation of what arrived (an error when it confirms
  // more than was sent), the count of sequenced messages.
  std::optional<ProtocolError> take(const ClientMessage& message);
  // Sent a sequenced message: kept for a resume until the agent confirms it.
  void keep_for_resume(const std::shared_ptr<const std::string>& frame);
  // The agent received everything up to `received`: no need to keep it.
  void acknowledged(uint64_t confirmed);

  std::shared_ptr<net::FramedConnection> connection;
  // Where the connection's frames go: this session's id, or the one it resumed.
  std::shared_ptr<ClientId> route;
  boost::asio::steady_timer handshake_deadline;
  std::string resume_key;      // from the hello
  bool authenticated = false;  // welcomed: may send full-size frames
  bool joined = false;         // its join was taken: an agent of the job, no longer a stranger
  uint64_t received = 0;       // sequenced messages from the agent
  uint64_t sent = 0;           // sequenced messages to it; those not yet confirmed are kept:
  std::deque<std::shared_ptr<const std::string>> unacked;  // numbers sent - size + 1 .. sent
  size_t unacked_bytes = 0;
  bool resumable = true;  // false once the kept messages outgrew kMaxUnackedBytes
};

// `message` as it goes on the wire, in a buffer every recipient's queue can share.
std::shared_ptr<const std::string> frame_of(const ServerMessage& message);

// Why a resume was refused, as the error reply says it.
struct ResumeRefused {
  const char* code;
  std::string text;
};

class Sessions {
 public:
  Session& add(ClientId id, std::shared_ptr<net::FramedConnection> connection,
               boost::asio::io_context& io);
  Session* find(ClientId id);
  const Session* find(ClientId id) const;
  void erase(ClientId id);
  size_t size() const { return sessions_.size(); }
  bool empty() const { return sessions_.empty(); }
  std::vector<ClientId> ids() const;

  // Its join was taken: a resume may name its key from now on (the first with a key keeps it).
  void remember_resume_key(ClientId id);
  // A connection a resume replaced says nothing more about its session.
  bool is_current(ClientId id, const net::FramedConnection* connection) const;
  // Sends `outgoing` to each of its recipients that is still here.
  void send(const Outgoing& outgoing);
  // Moves the session `resume` names onto connection `from`'s (a fresh connection, just
  // welcomed) and sends the agent what it missed; returns the resumed session's id. `from`'s
  // own session stays, without its connection, for the caller to forget.
  std::variant<ClientId, ResumeRefused> resume(ClientId from, const Resume& resume);

 private:
  std::unordered_map<ClientId, std::unique_ptr<Session>> sessions_;
  // The resume key of every joined session.
  std::unordered_map<std::string, ClientId> resume_keys_;
};

}  // namespace npu_run::rdzv
