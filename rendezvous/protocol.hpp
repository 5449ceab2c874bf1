// The rendezvous wire format: frames of a 4-byte big-endian length and a JSON object. Lengths
// and every field are checked against limits before anything is allocated or trusted, and bad
// input becomes a ProtocolError, never an exception escaping to the event loop.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "rendezvous/messages.hpp"

namespace npu_run::rdzv {

struct Limits {
  // Agents send small frames; the server's answers can carry the peer table of a large job.
  static constexpr size_t kMaxClientFrame = size_t{64} * 1024;
  // Until it has been welcomed a connection may only say hello and auth, which are far smaller.
  static constexpr size_t kMaxHandshakeFrame = 1024;
  static constexpr size_t kMaxServerFrame = size_t{64} * 1024 * 1024;
  static constexpr size_t kMaxName = 255;  // host names, addresses
  static constexpr size_t kMaxRunId = 128;
  static constexpr size_t kMaxNonce = 64;      // hex digits, also of proofs (HMAC-SHA256)
  static constexpr size_t kMaxText = 4096;     // descriptions, error messages
  static constexpr size_t kMaxDevices = 4096;  // entries in device and device-ip lists
  static constexpr int kMaxNodes = 1'000'000;
  static constexpr int kMaxWorkersPerNode = 4096;
};

struct ProtocolError {
  std::string code;  // "too_large", "bad_json", "bad_message"
  std::string message;
};

std::string encode_frame(std::string_view payload);

// Splits a byte stream into frame payloads, across arbitrary TCP segment boundaries.
class FrameDecoder {
 public:
  explicit FrameDecoder(size_t max_frame) : max_frame_(max_frame) {}
  // Appends `data`; complete payloads go to `frames`. Returns an error (and stays failed) when a
  // length prefix exceeds the limit: the length is checked before the payload is buffered.
  std::optional<ProtocolError> feed(std::string_view data, std::vector<std::string>& frames);
  size_t buffered() const { return buffer_.size(); }
  // Frames whose length prefix has not arrived yet are checked against the new limit.
  void set_max_frame(size_t max_frame) { max_frame_ = max_frame; }

 private:
  size_t max_frame_;
  std::string buffer_;
  bool failed_ = false;
};

std::string encode(const ClientMessage& message);
std::string encode(const ServerMessage& message);

std::variant<ClientMessage, ProtocolError> decode_client_message(std::string_view json);
std::variant<ServerMessage, ProtocolError> decode_server_message(std::string_view json);

}  // namespace npu_run::rdzv
