#include "rendezvous/client/client_checks.hpp"

#include <fmt/format.h>

#include "rendezvous/client/client.hpp"
#include "rendezvous/protocol/auth.hpp"

namespace npu_run::rdzv {

std::variant<Auth, std::string> answer_challenge(const ClientOptions& options,
                                                 const std::string& agent_nonce,
                                                 const Challenge& challenge, HandshakeState state,
                                                 const std::string& endpoint) {
  if (state.welcomed || state.challenged)
    return fmt::format("the rendezvous server at {} sent an unexpected challenge", endpoint);
  if (options.token.empty()) {
    return fmt::format(
        "the rendezvous server at {} requires a token and this agent has none; give every node "
        "the same token (--rdzv-token-file, NPU_RUN_RDZV_TOKEN or --rdzv-token)",
        endpoint);
  }
  // The server proves it knows the token before this agent answers, so that a stranger on the
  // port learns nothing and cannot pose as the job's server.
  const std::string expected =
      server_proof(options.token, options.hello.run_id, agent_nonce, challenge.nonce);
  if (!proofs_match(expected, challenge.proof)) {
    return fmt::format(
        "the rendezvous server at {} does not know this agent's token (its proof did not "
        "match); give every node the same token",
        endpoint);
  }
  return Auth{agent_proof(options.token, options.hello.run_id, challenge.nonce, agent_nonce)};
}

std::optional<std::string> welcome_refusal(const ClientOptions& options, const Welcome& welcome,
                                           HandshakeState state,
                                           const std::optional<Welcome>& session,
                                           const std::string& endpoint) {
  if (!options.token.empty() && !state.challenged) {
    return fmt::format(
        "the rendezvous server at {} accepted this agent without asking for the token this "
        "agent has; it is not this job's server, or it was started without the token",
        endpoint);
  }
  if (session && (welcome.heartbeat_interval_ms != session->heartbeat_interval_ms ||
                  welcome.heartbeat_timeout_ms != session->heartbeat_timeout_ms)) {
    return fmt::format(
        "the rendezvous server at {} answered the resume with other heartbeat settings; it is "
        "not the server this agent joined",
        endpoint);
  }
  return std::nullopt;
}

std::optional<LinkLoss> link_loss(const net::ConnectionClosed& why, const std::string& endpoint) {
  using Cause = net::ConnectionClosed::Cause;
  switch (why.cause) {
    case Cause::kPeerClosed:
      return LinkLoss{
          fmt::format("lost the connection to the rendezvous server at {}: closed by the server",
                      endpoint),
          true};
    case Cause::kReadError:
      return LinkLoss{fmt::format("lost the connection to the rendezvous server at {}: {}",
                                  endpoint, why.text()),
                      false};
    case Cause::kWriteError:
    case Cause::kQueueFull:
      return LinkLoss{
          fmt::format("cannot send to the rendezvous server at {}: {}", endpoint, why.text()),
          false};
    case Cause::kSent:
      break;
  }
  return std::nullopt;
}

}  // namespace npu_run::rdzv
