#include "store/wire.hpp"

#include <fmt/format.h>

#include <array>
#include <cstring>

namespace npu_run::store {

namespace {

// The command numbers of each generation, in wire order.
constexpr std::array kTorch1Commands{Command::kSet,     Command::kCompareSet, Command::kGet,
                                     Command::kAdd,     Command::kCheck,      Command::kWait,
                                     Command::kNumKeys, Command::kWatchKey,   Command::kDeleteKey};
constexpr std::array kTorch2Commands{Command::kValidate,   Command::kSet,      Command::kCompareSet,
                                     Command::kGet,        Command::kAdd,      Command::kCheck,
                                     Command::kWait,       Command::kNumKeys,  Command::kDeleteKey,
                                     Command::kAppend,     Command::kMultiGet, Command::kMultiSet,
                                     Command::kCancelWait, Command::kPing};

// The tier's own commands follow torch 2.x's.
constexpr std::array kTierOnlyCommands{Command::kWaitTagged, Command::kCancelTagged};

std::optional<Command> command_of(Generation generation, uint8_t number) {
  if (generation == Generation::kTorch1) {
    if (number < kTorch1Commands.size()) return kTorch1Commands[number];
    return std::nullopt;
  }
  if (number < kTorch2Commands.size()) return kTorch2Commands[number];
  const size_t tier = number - kTorch2Commands.size();
  if (generation == Generation::kTier && tier < kTierOnlyCommands.size())
    return kTierOnlyCommands[tier];
  return std::nullopt;
}

uint8_t number_of(Generation generation, Command command) {
  const auto find = [command](const auto& table) -> uint8_t {
    for (size_t i = 0; i < table.size(); ++i)
      if (table[i] == command) return static_cast<uint8_t>(i);
    throw std::invalid_argument(
        fmt::format("{} does not exist in this TCPStore generation", command_name(command)));
  };
  if (generation == Generation::kTorch1) return find(kTorch1Commands);
  if (generation == Generation::kTier) {
    for (size_t i = 0; i < kTierOnlyCommands.size(); ++i)
      if (kTierOnlyCommands[i] == command) return static_cast<uint8_t>(kTorch2Commands.size() + i);
  }
  return find(kTorch2Commands);
}

template <typename T>
T load_le(const char* p) {
  T value{};
  std::memcpy(&value, p, sizeof(T));  // x86_64 and aarch64 are little-endian, as torch assumes
  return value;
}

// The fields after the command byte, before any counted part.
std::vector<RequestDecoder::Field> fixed_fields(Command command) {
  using Field = RequestDecoder::Field;
  switch (command) {
    case Command::kValidate:
    case Command::kPing:
    case Command::kCancelTagged:
      return {Field::kU32};
    case Command::kWaitTagged:
      return {Field::kU32, Field::kCount};
    case Command::kSet:
    case Command::kAppend:
      return {Field::kKey, Field::kValue};
    case Command::kCompareSet:
      return {Field::kKey, Field::kValue, Field::kValue};
    case Command::kGet:
    case Command::kDeleteKey:
    case Command::kWatchKey:
      return {Field::kKey};
    case Command::kAdd:
      return {Field::kKey, Field::kI64};
    case Command::kCheck:
    case Command::kWait:
    case Command::kMultiGet:
    case Command::kMultiSet:
      return {Field::kCount};
    case Command::kNumKeys:
    case Command::kCancelWait:
      return {};
  }
  return {};
}

}  // namespace

std::optional<Generation> detect_generation(std::string_view first) {
  if (first.empty()) return std::nullopt;
  if (first[0] != '\0') return Generation::kTorch1;
  if (first.size() < 5) return std::nullopt;
  const auto magic = load_le<uint32_t>(first.data() + 1);
  if (magic == kValidationMagic) return Generation::kTorch2;
  if (magic == kTierMagic) return Generation::kTier;
  return Generation::kTorch1;
}

const char* generation_name(Generation generation) {
  switch (generation) {
    case Generation::kTorch1:
      return "torch 1.x";
    case Generation::kTorch2:
      return "torch 2.x";
    case Generation::kTier:
      return "npu_run tier";
  }
  return "unknown";
}

const char* command_name(Command command) {
  switch (command) {
    case Command::kValidate:
      return "validate";
    case Command::kSet:
      return "set";
    case Command::kCompareSet:
      return "compare_set";
    case Command::kGet:
      return "get";
    case Command::kAdd:
      return "add";
    case Command::kCheck:
      return "check";
    case Command::kWait:
      return "wait";
    case Command::kNumKeys:
      return "num_keys";
    case Command::kWatchKey:
      return "watch_key";
    case Command::kDeleteKey:
      return "delete_key";
    case Command::kAppend:
      return "append";
    case Command::kMultiGet:
      return "multi_get";
    case Command::kMultiSet:
      return "multi_set";
    case Command::kCancelWait:
      return "cancel_wait";
    case Command::kPing:
      return "ping";
    case Command::kWaitTagged:
      return "wait_tagged";
    case Command::kCancelTagged:
      return "cancel_tagged";
  }
  return "unknown";
}

// The decoder resumes where the last read ended (the request under construction and the field
// it is in), so a request that arrives a byte at a time costs no more than one that arrives
// whole. Lengths and counts are checked as soon as they are read.
std::optional<StoreWireError> RequestDecoder::feed(std::string_view data,
                                                   std::vector<Request>& out) {
  if (failed_) return StoreWireError{"the connection already broke the protocol"};
  buffer_.append(data);
  try {
    while (parse_field(out)) {
    }
  } catch (const StoreWireError& e) {
    failed_ = true;
    buffer_.clear();
    consumed_ = 0;
    return e;
  }
  if (consumed_ == buffer_.size()) {
    buffer_.clear();
    consumed_ = 0;
  } else if (consumed_ > 0) {
    buffer_.erase(0, consumed_);
    consumed_ = 0;
  }
  return std::nullopt;
}

bool RequestDecoder::parse_field(std::vector<Request>& out) {
  const std::string_view rest = std::string_view(buffer_).substr(consumed_);
  if (!in_request_) {
    if (rest.empty()) return false;
    const auto number = static_cast<uint8_t>(rest[0]);
    const auto command = command_of(generation_, number);
    if (!command) {
      throw StoreWireError{
          fmt::format("unknown command {} for a {} client", number, generation_name(generation_))};
    }
    partial_ = Request{};
    partial_.command = *command;
    fields_ = fixed_fields(*command);
    next_field_ = 0;
    count_ = 0;
    value_pending_ = false;
    request_bytes_ = 1;
    in_request_ = true;
    consumed_ += 1;
    return finish_if_complete(out);
  }
  const Field field = next_field_ < fields_.size() ? fields_[next_field_]
                      : value_pending_             ? Field::kValue
                                                   : Field::kKey;
  size_t used = 0;
  switch (field) {
    case Field::kU32:
      if (rest.size() < 4) return false;
      partial_.number = load_le<uint32_t>(rest.data());
      used = 4;
      break;
    case Field::kI64:
      if (rest.size() < 8) return false;
      partial_.delta = load_le<int64_t>(rest.data());
      used = 8;
      break;
    case Field::kCount: {
      if (rest.size() < 8) return false;
      count_ = load_le<uint64_t>(rest.data());
      if (count_ > limits_.max_keys) {
        throw StoreWireError{
            fmt::format("a request with {} keys (the limit is {})", count_, limits_.max_keys)};
      }
      used = 8;
      break;
    }
    case Field::kKey:
    case Field::kValue: {
      if (rest.size() < 8) return false;
      const uint64_t length = load_le<uint64_t>(rest.data());
      const bool key = field == Field::kKey;
      const size_t max = key ? limits_.max_key : limits_.max_value;
      if (length > max) {
        throw StoreWireError{
            fmt::format("a {} of {} bytes (the limit is {})", key ? "key" : "value", length, max)};
      }
      if (request_bytes_ + 8 + length > limits_.max_request) {
        throw StoreWireError{
            fmt::format("a request of more than {} bytes (the limit)", limits_.max_request)};
      }
      if (rest.size() - 8 < length) return false;
      (key ? partial_.keys : partial_.values).emplace_back(rest.substr(8, length));
      used = 8 + length;
      break;
    }
  }
  consumed_ += used;
  request_bytes_ += used;
  if (next_field_ < fields_.size()) {
    ++next_field_;
  } else if (field == Field::kKey && partial_.command == Command::kMultiSet) {
    value_pending_ = true;  // the counted part: a key per item, and a value after it for MULTI_SET
  } else {
    value_pending_ = false;
    --count_;
  }
  return finish_if_complete(out);
}

bool RequestDecoder::finish_if_complete(std::vector<Request>& out) {
  if (next_field_ < fields_.size() || count_ > 0) return true;
  out.push_back(std::move(partial_));
  in_request_ = false;
  return true;
}

bool tier_answers(Command command) {
  return command != Command::kWaitTagged && command != Command::kCancelTagged;
}

void append_bytes(std::string& out, std::string_view value) {
  const uint64_t length = value.size();
  out.append(reinterpret_cast<const char*>(&length), sizeof length);
  out.append(value);
}

void append_i64(std::string& out, int64_t value) {
  out.append(reinterpret_cast<const char*>(&value), sizeof value);
}

void append_u32(std::string& out, uint32_t value) {
  out.append(reinterpret_cast<const char*>(&value), sizeof value);
}

void append_byte(std::string& out, uint8_t value) {
  out.push_back(static_cast<char>(value));
}

std::string encode_request(Generation generation, const Request& r) {
  std::string out;
  append_byte(out, number_of(generation, r.command));
  switch (r.command) {
    case Command::kValidate:
    case Command::kPing:
    case Command::kCancelTagged:
      append_u32(out, r.number);
      break;
    case Command::kWaitTagged:
      append_u32(out, r.number);
      [[fallthrough]];
    case Command::kCheck:
    case Command::kWait:
    case Command::kMultiGet:
    case Command::kMultiSet: {
      const uint64_t n = r.keys.size();
      out.append(reinterpret_cast<const char*>(&n), sizeof n);
      for (size_t i = 0; i < r.keys.size(); ++i) {
        append_bytes(out, r.keys[i]);
        if (r.command == Command::kMultiSet) append_bytes(out, r.values.at(i));
      }
      break;
    }
    case Command::kAdd:
      append_bytes(out, r.keys.at(0));
      append_i64(out, r.delta);
      break;
    default:
      for (const auto& key : r.keys) append_bytes(out, key);
      for (const auto& value : r.values) append_bytes(out, value);
  }
  return out;
}

}  // namespace npu_run::store
