#include "rendezvous/protocol/auth.hpp"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include <array>
#include <stdexcept>

#include "basics/text.hpp"

namespace npu_run::rdzv {

namespace {

// Fields joined with a separator that cannot occur in them (run ids are checked names, nonces
// hex), so that two different field lists never produce the same message.
std::string message_of(std::string_view label, std::string_view run_id, std::string_view first,
                       std::string_view second) {
  std::string m;
  m.reserve(64 + run_id.size() + first.size() + second.size());
  m.append("npu_run-rdzv ").append(label);
  for (std::string_view part : {run_id, first, second}) m.append(1, '\n').append(part);
  return m;
}

}  // namespace

std::string random_nonce() {
  // Without getrandom (Linux before 3.17) OpenSSL reads /dev/urandom, and by default keeps it
  // open without close-on-exec: the one descriptor of the agent a child could inherit.
  static const bool devices_not_kept = [] {
    RAND_keep_random_devices_open(0);
    return true;
  }();
  (void)devices_not_kept;
  std::array<unsigned char, 32> bytes{};
  if (RAND_bytes(bytes.data(), static_cast<int>(bytes.size())) != 1) {
    throw std::runtime_error("OpenSSL could not produce random bytes for a rendezvous nonce");
  }
  return to_hex(bytes.data(), bytes.size());
}

std::string hmac_sha256_hex(std::string_view key, std::string_view message) {
  std::array<unsigned char, EVP_MAX_MD_SIZE> digest{};
  unsigned int size = 0;
  if (HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
           reinterpret_cast<const unsigned char*>(message.data()), message.size(), digest.data(),
           &size) == nullptr) {
    throw std::runtime_error("OpenSSL could not compute an HMAC-SHA256");
  }
  return to_hex(digest.data(), size);
}

std::string sha256_hex(std::string_view data) {
  std::array<unsigned char, EVP_MAX_MD_SIZE> digest{};
  unsigned int size = 0;
  if (EVP_Digest(data.data(), data.size(), digest.data(), &size, EVP_sha256(), nullptr) != 1) {
    throw std::runtime_error("OpenSSL could not compute a SHA-256");
  }
  return to_hex(digest.data(), size);
}

std::string server_proof(std::string_view token, std::string_view run_id,
                         std::string_view agent_nonce, std::string_view server_nonce) {
  return hmac_sha256_hex(token, message_of("server", run_id, agent_nonce, server_nonce));
}

std::string agent_proof(std::string_view token, std::string_view run_id,
                        std::string_view server_nonce, std::string_view agent_nonce) {
  return hmac_sha256_hex(token, message_of("agent", run_id, server_nonce, agent_nonce));
}

bool proofs_match(std::string_view expected, std::string_view received) {
  return expected.size() == received.size() &&
         CRYPTO_memcmp(expected.data(), received.data(), expected.size()) == 0;
}

}  // namespace npu_run::rdzv
