#include "net/frames.hpp"

#include <fmt/format.h>

#include <cstdint>

namespace npu_run::net {

std::string encode_frame(std::string_view payload) {
  const auto n = static_cast<uint32_t>(payload.size());
  std::string frame;
  frame.reserve(4 + payload.size());
  frame.push_back(static_cast<char>((n >> 24) & 0xff));
  frame.push_back(static_cast<char>((n >> 16) & 0xff));
  frame.push_back(static_cast<char>((n >> 8) & 0xff));
  frame.push_back(static_cast<char>(n & 0xff));
  frame.append(payload);
  return frame;
}

std::optional<WireError> FrameDecoder::feed(std::string_view data,
                                            std::vector<std::string>& frames) {
  if (failed_) return WireError{"too_large", "the connection already sent an oversized frame"};
  buffer_.append(data);
  size_t pos = 0;
  while (buffer_.size() - pos >= 4) {
    const auto* p = reinterpret_cast<const unsigned char*>(buffer_.data() + pos);
    const size_t length =
        (size_t{p[0]} << 24) | (size_t{p[1]} << 16) | (size_t{p[2]} << 8) | size_t{p[3]};
    if (length > max_frame_) {
      failed_ = true;
      buffer_.clear();
      return WireError{"too_large", fmt::format("frame of {} bytes exceeds the limit of {} bytes",
                                                length, max_frame_)};
    }
    if (buffer_.size() - pos - 4 < length) break;  // the rest of this frame has not arrived yet
    frames.emplace_back(buffer_, pos + 4, length);
    pos += 4 + length;
  }
  buffer_.erase(0, pos);
  return std::nullopt;
}

FirstBytes classify_first_bytes(std::string_view first) {
  if (first.empty()) return FirstBytes::kUndecided;
  if (first[0] != '\0') return FirstBytes::kForeign;
  if (first.size() < 5) return FirstBytes::kUndecided;
  return first[4] == '{' ? FirstBytes::kFrame : FirstBytes::kForeign;
}

}  // namespace npu_run::net
