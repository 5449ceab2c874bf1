// The TCPStore wire format of both torch generations, byte for byte as real clients sent it
// (recorded through a proxy between torch 1.13's, resp. Debian 13's torch 2.6's, client and
// server), and the limits checked before anything is buffered.
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "store/wire.hpp"

namespace test_store_wire {

using namespace npu_run::store;

namespace {

std::string hex(const std::string& text) {
  std::string out;
  for (size_t i = 0; i + 1 < text.size(); i += 2)
    out.push_back(static_cast<char>(std::stoi(text.substr(i, 2), nullptr, 16)));
  return out;
}

std::vector<Request> decode(Generation generation, const std::string& bytes) {
  RequestDecoder decoder(generation, StoreLimits{});
  std::vector<Request> out;
  const auto error = decoder.feed(bytes, out);
  REQUIRE_FALSE(error);
  REQUIRE(decoder.buffered() == 0);
  return out;
}

// Recorded from `TCPStore(...).set("k", "v")` and friends, through env://'s "/" prefix.
const std::string k113Set = hex("0002000000000000002f6b010000000000000076");
const std::string k113Wait = hex("05010000000000000002000000000000002f6b");
const std::string k113Get = hex("0202000000000000002f6b");
const std::string k113Add = hex("0302000000000000002f6e0500000000000000");
const std::string k113CompareSet =
    hex("0102000000000000002f6b010000000000000076010000000000000077");
const std::string k113NumKeys = hex("06");
const std::string k113Delete =
    hex("08"
        "02000000000000002f6b");
const std::string k26Validate = hex("00cef7853c");
const std::string k26Ping = hex("0d23750000");
const std::string k26Set = hex("0102000000000000002f6b010000000000000076");
const std::string k26Check = hex("05020000000000000002000000000000002f6b03000000000000002f7a7a");
const std::string k26Append =
    hex("0902000000000000002f610100000000000000"
        "78");
const std::string k26MultiSet = hex(
    "0b020000000000000003000000000000002f6d3101000000000000003103000000000000002f6d3201000000000"
    "0000032");
const std::string k26MultiGet =
    hex("0a020000000000000003000000000000002f6d3103000000000000002f6d32");
const std::string k26CancelWait = hex("0c");

}  // namespace

TEST_CASE("store wire: the generation is told from the first bytes", "[unit][store]") {
  CHECK(detect_generation("") == std::nullopt);
  CHECK(detect_generation(k113Get) == Generation::kTorch1);  // any non-zero command byte
  CHECK(detect_generation(hex("06")) == Generation::kTorch1);
  CHECK(detect_generation(hex("00cef785")) == std::nullopt);  // SET or VALIDATE: not yet known
  CHECK(detect_generation(k26Validate) == Generation::kTorch2);
  CHECK(detect_generation(k113Set) == Generation::kTorch1);
}

TEST_CASE("store wire: torch 1.13's requests as its client sends them", "[unit][store]") {
  const auto requests = decode(Generation::kTorch1, k113Set + k113Wait + k113Get + k113Add +
                                                        k113CompareSet + k113NumKeys + k113Delete);
  REQUIRE(requests.size() == 7);
  CHECK(requests[0].command == Command::kSet);
  CHECK(requests[0].keys == std::vector<std::string>{"/k"});
  CHECK(requests[0].values == std::vector<std::string>{"v"});
  CHECK(requests[1].command == Command::kWait);
  CHECK(requests[1].keys == std::vector<std::string>{"/k"});
  CHECK(requests[2].command == Command::kGet);
  CHECK(requests[3].command == Command::kAdd);
  CHECK(requests[3].keys[0] == "/n");
  CHECK(requests[3].delta == 5);
  CHECK(requests[4].command == Command::kCompareSet);
  CHECK(requests[4].values == std::vector<std::string>{"v", "w"});
  CHECK(requests[5].command == Command::kNumKeys);
  CHECK(requests[6].command == Command::kDeleteKey);
  // Encoding gives back the very bytes.
  for (const auto& [bytes, request] : {std::pair{k113Set, requests[0]},
                                       {k113Add, requests[3]},
                                       {k113CompareSet, requests[4]},
                                       {k113Delete, requests[6]}})
    CHECK(encode_request(Generation::kTorch1, request) == bytes);
}

TEST_CASE("store wire: torch 2.6's requests as its client sends them", "[unit][store]") {
  const auto requests =
      decode(Generation::kTorch2, k26Validate + k26Ping + k26Set + k26Check + k26Append +
                                      k26MultiSet + k26MultiGet + k26CancelWait);
  REQUIRE(requests.size() == 8);
  CHECK(requests[0].command == Command::kValidate);
  CHECK(requests[0].number == kValidationMagic);
  CHECK(requests[1].command == Command::kPing);
  CHECK(requests[1].number == 0x7523);
  CHECK(requests[2].command == Command::kSet);
  CHECK(requests[3].command == Command::kCheck);
  CHECK(requests[3].keys == std::vector<std::string>{"/k", "/zz"});
  CHECK(requests[4].command == Command::kAppend);
  CHECK(requests[4].values == std::vector<std::string>{"x"});
  CHECK(requests[5].command == Command::kMultiSet);
  CHECK(requests[5].keys == std::vector<std::string>{"/m1", "/m2"});
  CHECK(requests[5].values == std::vector<std::string>{"1", "2"});
  CHECK(requests[6].command == Command::kMultiGet);
  CHECK(requests[6].keys == std::vector<std::string>{"/m1", "/m2"});
  CHECK(requests[7].command == Command::kCancelWait);
  for (const auto& [bytes, request] : {std::pair{k26Validate, requests[0]},
                                       {k26Ping, requests[1]},
                                       {k26Check, requests[3]},
                                       {k26MultiSet, requests[5]},
                                       {k26MultiGet, requests[6]}})
    CHECK(encode_request(Generation::kTorch2, request) == bytes);
}

TEST_CASE("store wire: a request split at every byte decodes the same", "[unit][store]") {
  const std::string stream = k26Validate + k26MultiSet + k26Check + k26CancelWait;
  RequestDecoder decoder(Generation::kTorch2, StoreLimits{});
  std::vector<Request> out;
  for (const char byte : stream) REQUIRE_FALSE(decoder.feed(std::string(1, byte), out));
  REQUIRE(out.size() == 4);
  CHECK(out[1].values == std::vector<std::string>{"1", "2"});
  CHECK(out[2].keys == std::vector<std::string>{"/k", "/zz"});
  CHECK(decoder.buffered() == 0);
}

TEST_CASE("store wire: limits are checked before the announced bytes arrive", "[unit][store]") {
  StoreLimits limits;
  limits.max_key = 16;
  limits.max_value = 32;
  limits.max_keys = 4;
  limits.max_request = 64;
  std::vector<Request> out;
  const auto fails_with = [&](Generation g, const std::string& bytes, const std::string& text) {
    RequestDecoder decoder(g, limits);
    const auto error = decoder.feed(bytes, out);
    REQUIRE(error);
    CHECK_THAT(error->message, Catch::Contains(text));
    // Failed for good: nothing more is decoded.
    CHECK(decoder.feed(k113NumKeys, out));
  };
  // Only the 9 bytes of a SET's header: a key of 2^40 bytes is refused at once.
  fails_with(Generation::kTorch1, hex("000000000000010000"), "a key of 1099511627776 bytes");
  fails_with(Generation::kTorch1, hex("0001000000000000002f") + hex("2100000000000000"),
             "a value of 33 bytes (the limit is 32)");
  fails_with(Generation::kTorch2, hex("060500000000000000"), "a request with 5 keys");
  // A WAIT of four 15-byte keys passes no single limit, but the request is over 64 bytes.
  std::string wait = hex("06") + hex("0400000000000000");
  for (int i = 0; i < 4; ++i) wait += hex("0f00000000000000") + std::string(15, 'k');
  fails_with(Generation::kTorch2, wait, "a request of more than 64 bytes");
  fails_with(Generation::kTorch1, hex("09"), "unknown command 9 for a torch 1.x client");
  fails_with(Generation::kTorch2, hex("0e"), "unknown command 14 for a torch 2.x client");
  CHECK(out.empty());
}

TEST_CASE("store wire: replies are little-endian fields", "[unit][store]") {
  std::string out;
  append_bytes(out, "v");
  append_i64(out, 5);
  append_u32(out, 0x7523);
  append_byte(out, static_cast<uint8_t>(WaitReply::kWaitCanceled));
  // What torch's servers answered: GET "v", ADD 5, PING's nonce, CANCEL_WAIT.
  CHECK(out == hex("010000000000000076") + hex("0500000000000000") + hex("23750000") + hex("01"));
}

TEST_CASE("store wire: npu_run's tier adds tagged waits to torch 2.x's numbering",
          "[unit][store][tier]") {
  CHECK(detect_generation(hex("0031555"
                              "04e")) == Generation::kTier);
  // WAIT_TAGGED 14: tag 7, one key "/k"; CANCEL_TAGGED 15: tag 7; SET keeps 2.x's number 1.
  const std::string wait = hex("0e07000000"
                               "0100000000000000"
                               "0200000000000000") +
                           "/k";
  CHECK(encode_request(Generation::kTier, {Command::kWaitTagged, {"/k"}, {}, 0, 7}) == wait);
  const auto requests = decode(Generation::kTier, wait + hex("0f07000000"));
  REQUIRE(requests.size() == 2);
  CHECK(requests[0].command == Command::kWaitTagged);
  CHECK(requests[0].number == 7);
  CHECK(requests[0].keys == std::vector<std::string>{"/k"});
  CHECK(requests[1].command == Command::kCancelTagged);
  CHECK(encode_request(Generation::kTier, {Command::kSet, {"a"}, {"b"}})[0] == 1);
  // A torch client cannot send them.
  RequestDecoder torch2(Generation::kTorch2, StoreLimits{});
  std::vector<Request> out;
  const auto error = torch2.feed(wait, out);
  REQUIRE(error);
  CHECK(error->message == "unknown command 14 for a torch 2.x client");
  CHECK_FALSE(tier_answers(Command::kWaitTagged));
  CHECK(tier_answers(Command::kSet));
  // The greeting is answered: it says node 0 took the connection.
  CHECK(tier_answers(Command::kValidate));
}

TEST_CASE("store wire: a connection's decoder holds the first bytes until they tell the generation",
          "[unit][store]") {
  ConnectionDecoder decoder;
  std::vector<Request> out;
  // VALIDATE's first bytes could still be a 1.13 SET: nothing is decoded yet.
  REQUIRE_FALSE(decoder.feed(k26Validate.substr(0, 3), out));
  CHECK(decoder.generation() == std::nullopt);
  CHECK(out.empty());
  REQUIRE_FALSE(decoder.feed(k26Validate.substr(3) + k26Set.substr(0, 4), out));
  CHECK(decoder.generation() == Generation::kTorch2);
  REQUIRE_FALSE(decoder.feed(k26Set.substr(4) + k26Ping, out));
  REQUIRE(out.size() == 3);
  CHECK(out[0].command == Command::kValidate);
  CHECK(out[1].keys == std::vector<std::string>{"/k"});
  CHECK(out[2].command == Command::kPing);
  // A 1.13 client is known from its first byte.
  ConnectionDecoder torch1;
  std::vector<Request> got;
  REQUIRE_FALSE(torch1.feed(k113Get, got));
  CHECK(torch1.generation() == Generation::kTorch1);
  CHECK(got.size() == 1);
}

TEST_CASE("store wire: a connection's decoder enforces each generation's rules", "[unit][store]") {
  const auto fails_with = [](const std::string& bytes, const std::string& text,
                             size_t decoded_before) {
    ConnectionDecoder decoder;
    std::vector<Request> out;
    const auto error = decoder.feed(bytes, out);
    REQUIRE(error);
    CHECK(error->message == text);
    CHECK(out.size() == decoded_before);  // the requests before the broken rule
    CHECK(decoder.feed(k26Ping, out));    // failed for good
  };
  const std::string tier_validate =
      hex("0031555"
          "04e");
  // VALIDATE, then a SET with the magic number 0x3c85f7ce as its key length: a 1.13 SET of a
  // 1 GB key cannot start like this, so the bytes are a 2.x client's, and a second VALIDATE
  // with another magic breaks the rule.
  fails_with(k26Validate + hex("00efbeadde"), "a validation with the wrong magic number 0xdeadbeef",
             1);
  // A tier is known by its own magic; it must not wait untagged.
  fails_with(tier_validate + k26Set + hex("060000000000000000"),  // WAIT for no keys
             "an untagged wait from a tier, whose waits are tagged", 2);
  fails_with(tier_validate + k26CancelWait, "an untagged wait from a tier, whose waits are tagged",
             1);
  // 1.13 has no VALIDATE: its first request may be anything.
  ConnectionDecoder torch1;
  std::vector<Request> out;
  CHECK_FALSE(torch1.feed(k113NumKeys + k113Set, out));
  CHECK(out.size() == 2);
}

}  // namespace test_store_wire
