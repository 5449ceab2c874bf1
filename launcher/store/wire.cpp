// The store protocol's numbers, names and reply encodings (decoding: store/decoders.cpp).
#include "store/wire.hpp"

#include <fmt/format.h>

#include <array>
#include <stdexcept>

#include "basics/enum_table.hpp"

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

}  // namespace

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

std::string_view generation_name(Generation generation) {
  static constexpr EnumTable<Generation, 3> kNames({{{Generation::kTorch1, "torch 1.x"},
                                                     {Generation::kTorch2, "torch 2.x"},
                                                     {Generation::kTier, "npu_run tier"}}});
  return kNames.name(generation);
}

std::string_view command_name(Command command) {
  static constexpr EnumTable<Command, 17> kNames({{{Command::kValidate, "validate"},
                                                   {Command::kSet, "set"},
                                                   {Command::kCompareSet, "compare_set"},
                                                   {Command::kGet, "get"},
                                                   {Command::kAdd, "add"},
                                                   {Command::kCheck, "check"},
                                                   {Command::kWait, "wait"},
                                                   {Command::kNumKeys, "num_keys"},
                                                   {Command::kWatchKey, "watch_key"},
                                                   {Command::kDeleteKey, "delete_key"},
                                                   {Command::kAppend, "append"},
                                                   {Command::kMultiGet, "multi_get"},
                                                   {Command::kMultiSet, "multi_set"},
                                                   {Command::kCancelWait, "cancel_wait"},
                                                   {Command::kPing, "ping"},
                                                   {Command::kWaitTagged, "wait_tagged"},
                                                   {Command::kCancelTagged, "cancel_tagged"}}});
  return kNames.name(command);
}

bool tier_answers(Command command) {
  return command != Command::kWaitTagged && command != Command::kCancelTagged;
}

std::shared_ptr<const std::string> wait_reply(WaitReply reply) {
  return std::make_shared<const std::string>(1, static_cast<char>(reply));
}

bool answer_is_empty(Command command) {
  return command == Command::kSet || command == Command::kAppend || command == Command::kMultiSet;
}

size_t request_bytes(const Request& request) {
  size_t bytes = 0;
  for (const auto& key : request.keys) bytes += key.size();
  for (const auto& value : request.values) bytes += value.size();
  return bytes;
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
