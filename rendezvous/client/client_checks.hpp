// What the agent's client makes of the server's side of a handshake and of a lost link, as pure
// functions (rendezvous/client/client.cpp acts on them): the answer to a token challenge, a welcome
// that cannot be this job's server's, and what a closed connection means.
#pragma once

#include <optional>
#include <string>
#include <variant>

#include "net/framed_connection.hpp"
#include "rendezvous/protocol/messages.hpp"

namespace npu_run::rdzv {

struct ClientOptions;

// Where the handshake of the current connection is.
struct HandshakeState {
  bool challenged = false;  // the server proved it knows the token
  bool welcomed = false;
};

// The agent's proof for `challenge`, or why it refuses to give one (an unexpected challenge,
// no token here, a server whose proof shows it does not know the token). `agent_nonce`: the
// nonce of this connection's hello.
std::variant<Auth, std::string> answer_challenge(const ClientOptions& options,
                                                 const std::string& agent_nonce,
                                                 const Challenge& challenge, HandshakeState state,
                                                 const std::string& endpoint);

// Why a welcome is refused: a server that never asked for the token this agent has, or one
// that answers a resume with other heartbeat settings than the session's (`session`: those
// of the session, when it is established).
std::optional<std::string> welcome_refusal(const ClientOptions& options, const Welcome& welcome,
                                           HandshakeState state,
                                           const std::optional<Welcome>& session,
                                           const std::string& endpoint);

// What a closed connection to the server means, for the messages: its text, and whether the
// server hung up on purpose (which a resume does not cure). Nothing when it closed because
// this agent finished sending.
struct LinkLoss {
  std::string text;
  bool server_closed = false;
};
std::optional<LinkLoss> link_loss(const net::ConnectionClosed& why, const std::string& endpoint);

}  // namespace npu_run::rdzv
