// The wire format of torch's c10d TCPStore, both generations, as their clients send it (facts
// recorded from real torch 1.13 and 2.6 clients; see docs/ARCHITECTURE.md, "The workers'
// store"). Little-endian; keys and values are a u64 length and the bytes; no framing, so a
// request is complete only when its last field has arrived.
//
//   torch 1.13: SET=0 COMPARE_SET GET ADD CHECK WAIT GETNUMKEYS WATCH_KEY DELETE_KEY; no greeting.
//   torch 2.x:  VALIDATE=0 (u32 magic 0x3C85F7CE, always first) SET COMPARE_SET GET ADD CHECK
//               WAIT GETNUMKEYS DELETE_KEY APPEND MULTI_GET MULTI_SET CANCEL_WAIT PING (u32,
//               echoed).
//
//   npu_run's tier (a node's proxy to node 0's store, never a torch client): torch 2.x's
//               numbering, VALIDATE with kTierMagic, and two more commands: WAIT_TAGGED=14
//               (u32 tag, then WAIT's keys) and CANCEL_TAGGED=15 (u32 tag), so that one
//               connection can hold many waits. Every request but the tagged ones gets one
//               answer, in order: TierReply::kAnswer and what a torch client would get
//               (nothing for VALIDATE, SET, APPEND, MULTI_SET), or kRefused and the reason (u64
//               length + text) where torch's server would close the connection, so that one
//               worker's bad request costs that worker only. A tagged wait that is satisfied
//               sends kWoken and its tag, whenever it happens. The answer to VALIDATE says node
//               0 took the connection: a proxy forwards nothing before it, so a connection
//               closed without it (node 0's accept queue overflowed and the greeting came too
//               late, say) lost nothing and is dialled again.
//
// The generation is told from the first bytes (detect_generation); they do not mix on one
// connection. Every length and count is checked against StoreLimits before anything waits for
// or allocates what it announces.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace npu_run::store {

enum class Generation { kTorch1, kTorch2, kTier };

// Which generation a connection speaks, from its first bytes; nullopt while too few have come.
// A 2.x client starts with VALIDATE and the magic (a tier with its own); a 1.13 client with
// any command, and a 1.13 SET (command 0) is followed by a key length, which would have to be
// about 1 GB to look like either magic.
std::optional<Generation> detect_generation(std::string_view first);

constexpr uint32_t kValidationMagic = 0x3C85F7CE;
constexpr uint32_t kTierMagic = 0x4E505531;
// "torch 1.x", "torch 2.x", "npu_run tier" for messages.
std::string_view generation_name(Generation generation);

enum class Command {
  kValidate,
  kSet,
  kCompareSet,
  kGet,
  kAdd,
  kCheck,
  kWait,
  kNumKeys,
  kWatchKey,  // torch 1.13 only, and unreachable from its Python API: refused
  kDeleteKey,
  kAppend,
  kMultiGet,
  kMultiSet,
  kCancelWait,
  kPing,
  kWaitTagged,    // tier only
  kCancelTagged,  // tier only
};

// "set", "compare_set", ... for messages.
std::string_view command_name(Command command);
// The command a generation numbers `number`; nothing for a number it does not use.
std::optional<Command> command_of(Generation generation, uint8_t number);

struct Request {
  Command command = Command::kSet;
  std::vector<std::string> keys;    // one key, or the keys of CHECK, WAIT, MULTI_GET, MULTI_SET
  std::vector<std::string> values;  // SET and APPEND: one; COMPARE_SET: expected, desired;
                                    // MULTI_SET: one per key
  int64_t delta = 0;                // ADD
  uint32_t number = 0;              // VALIDATE's magic, PING's nonce, a tagged wait's tag
};

struct StoreLimits {
  size_t max_key = size_t{64} * 1024;
  size_t max_value = size_t{64} * 1024 * 1024;
  size_t max_request = size_t{80} * 1024 * 1024;  // all fields of one request
  size_t max_keys = size_t{1} << 20;              // keys in one CHECK, WAIT, MULTI_GET, MULTI_SET
};

// What the peer did wrong; closes that connection only.
struct StoreWireError {
  std::string message;
};

// Splits one connection's byte stream into requests of a known generation, across any segment
// boundaries (store/decoders.cpp).
class RequestDecoder {
 public:
  enum class Field : uint8_t { kU32, kI64, kCount, kKey, kValue };

  RequestDecoder(Generation generation, StoreLimits limits)
      : generation_(generation), limits_(limits) {}
  // Appends `data`; complete requests go to `out`. Returns an error, and stays failed, at the
  // first request that breaks the protocol or the limits.
  std::optional<StoreWireError> feed(std::string_view data, std::vector<Request>& out);
  size_t buffered() const { return buffer_.size() - consumed_; }
  Generation generation() const { return generation_; }

 private:
  // Takes the next field of the request under construction (or the next command byte) from the
  // buffer; false when it has not fully arrived.
  bool parse_field(std::vector<Request>& out);
  void start_request(uint8_t number);
  // Reads `field` from the front of `rest` into the request; 0 when it has not fully arrived.
  size_t read_field(Field field, std::string_view rest);
  size_t read_bytes(Field field, std::string_view rest);
  bool finish_if_complete(std::vector<Request>& out);

  Generation generation_;
  StoreLimits limits_;
  std::string buffer_;
  size_t consumed_ = 0;
  bool failed_ = false;
  bool in_request_ = false;
  Request partial_;
  std::vector<Field> fields_;  // the fields before the counted part
  size_t next_field_ = 0;
  uint64_t count_ = 0;          // items of the counted part still to read
  bool value_pending_ = false;  // MULTI_SET: the item's key is read, its value is next
  size_t request_bytes_ = 0;
};

// One connection's side of the protocol from its first byte, as the server and each node's
// proxy read it: the generation told from the first bytes (held until they tell), requests
// decoded across segments, and the rules a generation's requests obey before anyone acts on
// them: a 2.x client and a tier greet with VALIDATE and their own magic number (which is how
// they are told apart) and keep to it; a tier's waits are tagged. A broken rule is an error, as
// a broken format is, and stays.
class ConnectionDecoder {
 public:
  ConnectionDecoder() = default;
  explicit ConnectionDecoder(StoreLimits limits) : limits_(limits) {}
  // Appends `bytes`; the requests before any error go to `out`.
  std::optional<StoreWireError> feed(std::string_view bytes, std::vector<Request>& out);
  // Unknown until the first bytes tell.
  std::optional<Generation> generation() const;

 private:
  std::optional<StoreWireError> broken_rule(const Request& request);

  StoreLimits limits_{};
  std::string first_bytes_;  // until the generation is known
  std::optional<RequestDecoder> decoder_;
  bool failed_ = false;
};

// Replies, identical in both torch generations.
enum class WaitReply : uint8_t { kStopWaiting = 0, kWaitCanceled = 1 };
// A wait's one-byte reply, to share among the connections it goes to.
std::shared_ptr<const std::string> wait_reply(WaitReply reply);
// What precedes each message a tier connection receives.
enum class TierReply : uint8_t { kAnswer = 0, kWoken = 1, kRefused = 2 };
// Whether a tier connection gets an answer for `command` (kAnswer or kRefused).
bool tier_answers(Command command);
// Commands a client gets no answer to: SET, APPEND, MULTI_SET.
bool answer_is_empty(Command command);
// The bytes of a request's keys and values: what a client's queue of them holds.
size_t request_bytes(const Request& request);
enum class CheckReply : uint8_t { kReady = 0, kNotReady = 1 };
void append_bytes(std::string& out, std::string_view value);  // u64 length + bytes
void append_i64(std::string& out, int64_t value);
void append_u32(std::string& out, uint32_t value);
void append_byte(std::string& out, uint8_t value);

// A request as a client of `generation` sends it: for tests and the load generator.
std::string encode_request(Generation generation, const Request& request);

}  // namespace npu_run::store
