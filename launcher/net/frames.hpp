// Length-prefixed frames: a 4-byte big-endian length, then the payload. The length is checked
// against a limit before the payload is buffered, so a peer cannot make us allocate what it
// merely announces.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace npu_run::net {

// What a peer did wrong on the wire; `code` is short and stable ("too_large", "bad_json", ...),
// `message` says it in words.
struct WireError {
  std::string code;
  std::string message;
};

std::string encode_frame(std::string_view payload);

// Splits a byte stream into frame payloads, across arbitrary TCP segment boundaries.
class FrameDecoder {
 public:
  explicit FrameDecoder(size_t max_frame) : max_frame_(max_frame) {}
  // Appends `data`; complete payloads go to `frames`. Returns an error (and stays failed) when a
  // length prefix exceeds the limit.
  std::optional<WireError> feed(std::string_view data, std::vector<std::string>& frames);
  size_t buffered() const { return buffer_.size(); }
  // Frames whose length prefix has not arrived yet are checked against the new limit.
  void set_max_frame(size_t max_frame) { max_frame_ = max_frame; }

 private:
  size_t max_frame_;
  std::string buffer_;
  bool failed_ = false;
};

// What the first bytes of a connection on a shared port say. npu_run's frames carry JSON objects
// and are far below 16 MiB: a zero byte (the length's top byte), three more, then '{'. Anything
// else is another protocol (the workers' TCPStore, whose first byte is a command number, or
// zero followed by a 64-bit length or a magic value).
enum class FirstBytes { kUndecided, kFrame, kForeign };
FirstBytes classify_first_bytes(std::string_view first);

}  // namespace npu_run::net
