#include "store/key_value_store.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <limits>

namespace npu_run::store {

namespace {

// std::stoll(value) as torch's server calls it, without exceptions: leading white space, an
// optional sign, at least one decimal digit; what follows the digits is ignored.
std::optional<int64_t> parse_like_stoll(const std::string& value) {
  size_t i = 0;
  while (i < value.size() && std::isspace(static_cast<unsigned char>(value[i])) != 0) ++i;
  bool negative = false;
  if (i < value.size() && (value[i] == '+' || value[i] == '-')) negative = value[i++] == '-';
  if (i >= value.size() || std::isdigit(static_cast<unsigned char>(value[i])) == 0)
    return std::nullopt;
  // Accumulated as a negative number: its range includes INT64_MIN.
  int64_t result = 0;
  constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
  for (; i < value.size() && std::isdigit(static_cast<unsigned char>(value[i])) != 0; ++i) {
    const int digit = value[i] - '0';
    if (result < (kMin + digit) / 10) return std::nullopt;  // out of range: stoll throws
    result = result * 10 - digit;
  }
  if (!negative) {
    if (result == kMin) return std::nullopt;
    result = -result;
  }
  return result;
}

std::string shorten(const std::string& text) {
  return text.size() <= 40 ? text : text.substr(0, 40) + "...";
}

}  // namespace

void KeyValueStore::store(const std::string& key, std::string value) {
  const auto it = values_.find(key);
  const size_t old = it == values_.end() ? 0 : key.size() + it->second.size();
  const size_t now = key.size() + value.size();
  if (bytes_ - old + now > max_bytes_) {
    throw StoreRequestError(fmt::format("the store would hold more than {} MiB (key '{}'); refused",
                                        max_bytes_ >> 20, shorten(key)));
  }
  bytes_ = bytes_ - old + now;
  if (it == values_.end())
    values_.emplace(key, std::move(value));
  else
    it->second = std::move(value);
}

void KeyValueStore::wake(const std::string& key, std::vector<ClientId>& woken) {
  const auto waiting = waiting_on_.find(key);
  if (waiting == waiting_on_.end()) return;
  for (const Mention& mention : waiting->second) {
    const auto it = waits_.find(mention.client);
    if (it == waits_.end() || it->second.serial != mention.serial) {
      --forgotten_mentions_;
      continue;
    }
    --live_mentions_;
    if (--it->second.missing == 0) {
      waits_.erase(it);
      woken.push_back(mention.client);
    }
  }
  waiting_on_.erase(waiting);
}

void KeyValueStore::set(const std::string& key, std::string value, std::vector<ClientId>& woken) {
  store(key, std::move(value));
  wake(key, woken);
}

std::string KeyValueStore::compare_set(const std::string& key, const std::string& expected,
                                       std::string desired, std::vector<ClientId>& woken) {
  const auto it = values_.find(key);
  if (it == values_.end()) {
    if (!expected.empty()) return expected;
    store(key, desired);
    wake(key, woken);
    return desired;
  }
  if (it->second == expected) store(key, std::move(desired));
  return values_.at(key);
}

int64_t KeyValueStore::add(const std::string& key, int64_t delta, std::vector<ClientId>& woken) {
  int64_t result = delta;
  if (const auto it = values_.find(key); it != values_.end()) {
    const auto current = parse_like_stoll(it->second);
    if (!current) {
      throw StoreRequestError(fmt::format("add on key '{}', whose value '{}' is not an integer",
                                          shorten(key), shorten(it->second)));
    }
    // torch adds signed integers without a check; two's complement wrap-around, defined here.
    result = static_cast<int64_t>(static_cast<uint64_t>(*current) + static_cast<uint64_t>(delta));
  }
  store(key, std::to_string(result));
  wake(key, woken);
  return result;
}

void KeyValueStore::append(const std::string& key, const std::string& tail,
                           std::vector<ClientId>& woken) {
  const auto it = values_.find(key);
  store(key, it == values_.end() ? tail : it->second + tail);
  wake(key, woken);
}

void KeyValueStore::multi_set(const std::vector<std::string>& keys, std::vector<std::string> values,
                              std::vector<ClientId>& woken) {
  for (size_t i = 0; i < keys.size() && i < values.size(); ++i)
    set(keys[i], std::move(values[i]), woken);
}

bool KeyValueStore::delete_key(const std::string& key) {
  const auto it = values_.find(key);
  if (it == values_.end()) return false;
  bytes_ -= key.size() + it->second.size();
  values_.erase(it);
  return true;
}

const std::string& KeyValueStore::get(const std::string& key) const {
  const auto it = values_.find(key);
  if (it == values_.end())
    throw StoreRequestError(fmt::format("get of key '{}', which does not exist", shorten(key)));
  return it->second;
}

std::vector<std::string> KeyValueStore::multi_get(const std::vector<std::string>& keys) const {
  std::vector<std::string> out;
  out.reserve(keys.size());
  for (const auto& key : keys) out.push_back(get(key));
  return out;
}

bool KeyValueStore::check(const std::vector<std::string>& keys) const {
  return std::all_of(keys.begin(), keys.end(),
                     [this](const std::string& key) { return values_.count(key) > 0; });
}

bool KeyValueStore::wait(ClientId client, const std::vector<std::string>& keys) {
  forget_wait(client);
  if (check(keys)) return true;
  const uint64_t serial = next_serial_++;
  size_t missing = 0;
  for (const auto& key : keys) {
    if (values_.count(key) > 0) continue;
    waiting_on_[key].push_back({client, serial});
    ++missing;
  }
  waits_[client] = Wait{missing, serial};
  live_mentions_ += missing;
  return false;
}

void KeyValueStore::forget_wait(ClientId client) {
  const auto it = waits_.find(client);
  if (it == waits_.end()) return;
  live_mentions_ -= it->second.missing;
  forgotten_mentions_ += it->second.missing;
  waits_.erase(it);
  // A client that waits and cancels in a loop on a key nobody writes must not grow the lists.
  if (forgotten_mentions_ > 2 * live_mentions_ + 4096) drop_forgotten_mentions();
}

void KeyValueStore::drop_forgotten_mentions() {
  for (auto it = waiting_on_.begin(); it != waiting_on_.end();) {
    std::erase_if(it->second, [this](const Mention& m) {
      const auto wait = waits_.find(m.client);
      return wait == waits_.end() || wait->second.serial != m.serial;
    });
    it = it->second.empty() ? waiting_on_.erase(it) : std::next(it);
  }
  forgotten_mentions_ = 0;
}

void KeyValueStore::clear() {
  values_.clear();
  waiting_on_.clear();
  waits_.clear();
  bytes_ = 0;
  live_mentions_ = 0;
  forgotten_mentions_ = 0;
}

}  // namespace npu_run::store
