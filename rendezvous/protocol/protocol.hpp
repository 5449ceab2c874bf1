// The rendezvous wire format: frames of a 4-byte big-endian length (net/frames.hpp) and a JSON
// object. Lengths and every field are checked against limits before anything is allocated or
// trusted, and bad input becomes a ProtocolError, never an exception escaping to the event loop.
// Encoding and decoding live in client_messages.cpp and server_messages.cpp.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "net/frames.hpp"
#include "rendezvous/protocol/messages.hpp"

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
  static constexpr size_t kMaxStackFrames = 3;     // RankStack::frames
  static constexpr size_t kMaxFrameText = 256;     // one frame
  static constexpr size_t kMaxBeatText = 200;      // a progress beat's text (as the agent keeps it)
  static constexpr size_t kMaxOddRanks = 1024;     // Decision::odd_ranks
  static constexpr size_t kMaxRecordedGroups = 8;  // RankStack::groups
  static constexpr size_t kMaxRecordedCalls = 4;   // GroupCalls::last
  static constexpr size_t kMaxCallText = 128;      // a RecordedCall's texts, a group's name
  static constexpr size_t kMaxHealthNotes = 64;    // Assigned::health_notes
  // PingRequest / PingReport: kMaxSentDevices devices, kMaxPingsPerDevice each; a ping's
  // detail as the agent cuts it. 192 answers of ~300 bytes fit a client frame.
  static constexpr size_t kMaxPings = 192;
  static constexpr size_t kMaxPingText = 160;
  static constexpr size_t kMaxPingFindings = 256;  // PingVerdict: pairs of a node, both ends
  static constexpr size_t kMaxEvidenceText = 256;  // each text of a FailureEvidence
  static constexpr size_t kMaxReportEvents = 512;  // Report::timeline, within a client frame
  static constexpr size_t kMaxTopologyLevels = 8;  // TopologyPath::switches, ::sources
};

// The frames are net's; a bad frame or message is a ProtocolError with a stable code
// ("too_large", "bad_json", "bad_message").
using ProtocolError = net::WireError;
using net::encode_frame;
using net::FrameDecoder;

std::string encode(const ClientMessage& message);
std::string encode(const ServerMessage& message);

std::variant<ClientMessage, ProtocolError> decode_client_message(std::string_view json);
std::variant<ServerMessage, ProtocolError> decode_server_message(std::string_view json);

}  // namespace npu_run::rdzv
