// libFuzzer target: both message parsers. Any text either decodes or is a ProtocolError, never a
// crash or an exception; what decodes re-encodes to text that decodes to the same encoding.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "rendezvous/protocol/protocol.hpp"

using namespace npu_run::rdzv;

namespace {

void require(bool ok) {
  if (!ok) std::abort();
}

template <typename Message, typename Decode>
void round_trip(std::string_view text, Decode decode) {
  const auto first = decode(text);
  if (!std::holds_alternative<Message>(first)) return;
  const std::string encoded = encode(std::get<Message>(first));
  const auto second = decode(encoded);
  require(std::holds_alternative<Message>(second));
  require(encode(std::get<Message>(second)) == encoded);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  round_trip<ClientMessage>(text, decode_client_message);
  round_trip<ServerMessage>(text, decode_server_message);
  return 0;
}
