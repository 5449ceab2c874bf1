// Proof that both ends of a rendezvous connection know the job's token, without sending it:
// an HMAC-SHA256 challenge-response over fresh nonces from both sides.
//
//   agent  -> hello {run_id, agent_nonce}
//   server -> challenge {server_nonce, server_proof = HMAC(token, "server" run_id agent_nonce
//   server_nonce)} agent  -> auth {agent_proof = HMAC(token, "agent" run_id server_nonce
//   agent_nonce)} server -> welcome, or error bad_token
//
// The labels keep one side's proof from being replayed as the other's; the nonces keep a proof
// from being replayed on another connection; the run id binds it to this job. The agent checks
// the server's proof too, so a stranger listening on the port cannot pose as the server.
#pragma once

#include <string>
#include <string_view>

namespace npu_run::rdzv {

// 32 bytes from OpenSSL's CSPRNG, as 64 lowercase hex digits.
std::string random_nonce();

std::string server_proof(std::string_view token, std::string_view run_id,
                         std::string_view agent_nonce, std::string_view server_nonce);
std::string agent_proof(std::string_view token, std::string_view run_id,
                        std::string_view server_nonce, std::string_view agent_nonce);

// Compares in constant time, so that timing does not reveal how much of a proof was right.
bool proofs_match(std::string_view expected, std::string_view received);

// HMAC-SHA256(key, message) as hex; also derives per-job tokens from a user's secret.
std::string hmac_sha256_hex(std::string_view key, std::string_view message);
// SHA-256 of `data` as hex: what the health gate compares of every node's training script.
std::string sha256_hex(std::string_view data);

}  // namespace npu_run::rdzv
