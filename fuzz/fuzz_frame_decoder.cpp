// libFuzzer target: the frame decoder, fed the input in pieces whose sizes the input itself
// chooses. Invariants: every frame is within the limit; a stream that is not refused loses and
// invents no byte (frames + prefixes + what is buffered = what was fed); feeding the same bytes
// in one piece gives the same frames.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "rendezvous/protocol/protocol.hpp"

using npu_run::rdzv::FrameDecoder;

namespace {
constexpr size_t kLimit = 512;

void require(bool ok) {
  if (!ok) std::abort();
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const size_t piece = 1 + data[0] % 17;  // the first byte sets the segment size
  const std::string stream(reinterpret_cast<const char*>(data) + 1, size - 1);

  FrameDecoder split(kLimit);
  std::vector<std::string> frames;
  bool refused = false;
  for (size_t pos = 0; pos < stream.size() && !refused; pos += piece)
    refused = split.feed(std::string_view(stream).substr(pos, piece), frames).has_value();

  FrameDecoder whole(kLimit);
  std::vector<std::string> whole_frames;
  const bool whole_refused = whole.feed(stream, whole_frames).has_value();

  size_t accounted = split.buffered();
  for (const std::string& f : frames) {
    require(f.size() <= kLimit);
    accounted += 4 + f.size();
  }
  if (!refused) {
    require(accounted == stream.size());
    require(!whole_refused && whole_frames == frames);
  } else {
    require(whole_refused);
    require(frames.size() == whole_frames.size() && frames == whole_frames);
  }
  return 0;
}
