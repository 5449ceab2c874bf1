// Reading a connection's requests: which generation it speaks, each request field by field
// across segment boundaries, and the order a generation's requests must come in.
#include <fmt/format.h>

#include <cstring>
#include <utility>

#include "store/wire.hpp"

namespace npu_run::store {

namespace {

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
    start_request(static_cast<uint8_t>(rest[0]));
    consumed_ += 1;
    return finish_if_complete(out);
  }
  const Field field = next_field_ < fields_.size() ? fields_[next_field_]
                      : value_pending_             ? Field::kValue
                                                   : Field::kKey;
  const size_t used = read_field(field, rest);
  if (used == 0) return false;
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

void RequestDecoder::start_request(uint8_t number) {
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
}

size_t RequestDecoder::read_field(Field field, std::string_view rest) {
  switch (field) {
    case Field::kU32:
      if (rest.size() < 4) return 0;
      partial_.number = load_le<uint32_t>(rest.data());
      return 4;
    case Field::kI64:
      if (rest.size() < 8) return 0;
      partial_.delta = load_le<int64_t>(rest.data());
      return 8;
    case Field::kCount:
      if (rest.size() < 8) return 0;
      count_ = load_le<uint64_t>(rest.data());
      if (count_ > limits_.max_keys) {
        throw StoreWireError{
            fmt::format("a request with {} keys (the limit is {})", count_, limits_.max_keys)};
      }
      return 8;
    case Field::kKey:
    case Field::kValue:
      return read_bytes(field, rest);
  }
  return 0;
}

// A key or a value: its length, checked before anything waits for what it announces, then
// its bytes.
size_t RequestDecoder::read_bytes(Field field, std::string_view rest) {
  if (rest.size() < 8) return 0;
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
  if (rest.size() - 8 < length) return 0;
  (key ? partial_.keys : partial_.values).emplace_back(rest.substr(8, length));
  return 8 + length;
}

bool RequestDecoder::finish_if_complete(std::vector<Request>& out) {
  if (next_field_ < fields_.size() || count_ > 0) return true;
  out.push_back(std::move(partial_));
  in_request_ = false;
  return true;
}

std::optional<StoreWireError> ConnectionDecoder::feed(std::string_view bytes,
                                                      std::vector<Request>& out) {
  if (failed_) return StoreWireError{"the connection already broke the protocol"};
  std::string held;
  if (!decoder_) {
    first_bytes_.append(bytes);
    const auto generation = detect_generation(first_bytes_);
    if (!generation) return std::nullopt;
    decoder_.emplace(*generation, limits_);
    held = std::exchange(first_bytes_, std::string());
    bytes = held;
  }
  const size_t first_new = out.size();
  std::optional<StoreWireError> error = decoder_->feed(bytes, out);
  for (size_t i = first_new; i < out.size(); ++i) {
    if (auto broken = broken_rule(out[i])) {
      out.resize(i);
      error = std::move(broken);
      break;
    }
  }
  if (error) failed_ = true;
  return error;
}

std::optional<Generation> ConnectionDecoder::generation() const {
  if (!decoder_) return std::nullopt;
  return decoder_->generation();
}

// A 2.x or tier connection starts with VALIDATE by construction: its magic number is how the
// generation was told. What is left to check: a later VALIDATE carries the same magic, and a
// tier waits only with tags.
std::optional<StoreWireError> ConnectionDecoder::broken_rule(const Request& r) {
  const bool tier = decoder_->generation() == Generation::kTier;
  if (tier && (r.command == Command::kWait || r.command == Command::kCancelWait))
    return StoreWireError{"an untagged wait from a tier, whose waits are tagged"};
  if (r.command == Command::kValidate && r.number != (tier ? kTierMagic : kValidationMagic))
    return StoreWireError{fmt::format("a validation with the wrong magic number {:#x}", r.number)};
  return std::nullopt;
}

}  // namespace npu_run::store
