// Reading the fields of one received JSON object: every field's type and size is checked, and
// what is wrong is named ("join message lacks 'node'"). Used by the decoders of both directions.
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>

#include "rendezvous/protocol/protocol.hpp"

namespace npu_run::rdzv {

using nlohmann::json;

// Thrown inside decoding only; decode_json() turns it into a ProtocolError.
struct BadMessage {
  std::string message;
};

// Reads fields of one JSON object with type and size checks.
class Fields {
 public:
  Fields(const json& object, std::string where) : object_(object), where_(std::move(where)) {
    if (!object_.is_object()) fail("is not a JSON object");
  }

  const json* find(const char* key) const {
    const auto it = object_.find(key);
    return it == object_.end() || it->is_null() ? nullptr : &*it;
  }
  const json& need(const char* key) const {
    const json* v = find(key);
    if (v == nullptr) fail(fmt::format("lacks '{}'", key));
    return *v;
  }
  std::string text(const char* key, size_t max, bool required = true) const {
    const json* v = required ? &need(key) : find(key);
    if (v == nullptr) return "";
    if (!v->is_string()) fail(fmt::format("'{}' is not a string", key));
    const auto& s = v->get_ref<const std::string&>();
    if (s.size() > max) fail(fmt::format("'{}' is longer than {} bytes", key, max));
    return s;
  }
  int64_t integer(const char* key, int64_t min, int64_t max) const {
    return integer_of(need(key), key, min, max);
  }
  std::optional<int64_t> optional_integer(const char* key, int64_t min, int64_t max) const {
    const json* v = find(key);
    if (v == nullptr) return std::nullopt;
    return integer_of(*v, key, min, max);
  }
  bool boolean(const char* key) const {
    const json* v = find(key);
    if (v == nullptr) return false;
    if (!v->is_boolean()) fail(fmt::format("'{}' is not true or false", key));
    return v->get<bool>();
  }
  const json& array(const char* key, size_t max, bool required = true) const {
    static const json kEmpty = json::array();
    const json* v = required ? &need(key) : find(key);
    if (v == nullptr) return kEmpty;
    if (!v->is_array()) fail(fmt::format("'{}' is not an array", key));
    if (v->size() > max) fail(fmt::format("'{}' has more than {} entries", key, max));
    return *v;
  }
  const json& object(const char* key) const {
    const json& v = need(key);
    if (!v.is_object()) fail(fmt::format("'{}' is not an object", key));
    return v;
  }
  [[noreturn]] void fail(const std::string& what) const {
    throw BadMessage{fmt::format("{} {}", where_, what)};
  }

 private:
  int64_t integer_of(const json& v, const char* key, int64_t min, int64_t max) const {
    if (!v.is_number_integer()) fail(fmt::format("'{}' is not an integer", key));
    if (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(max)) {
      fail(fmt::format("'{}' = {} is outside {}..{}", key, v.get<uint64_t>(), min, max));
    }
    const int64_t value = v.get<int64_t>();
    if (value < min || value > max)
      fail(fmt::format("'{}' = {} is outside {}..{}", key, value, min, max));
    return value;
  }

  const json& object_;
  std::string where_;
};

// Reads a string field naming a value of an enum with nlohmann's serialisation, which maps an
// unknown name to the first value silently: the name must come back from the value.
template <typename Enum>
Enum enum_field(const Fields& f, const char* key) {
  const std::string name = f.text(key, 32);
  const Enum value = json(name).get<Enum>();
  if (json(value).get<std::string>() != name)
    f.fail(fmt::format("has an unknown {} '{}'", key, name));
  return value;
}

// A count of sequenced messages (messages.hpp), as heartbeats, acks and resumes carry it.
inline uint64_t received_field(const Fields& f) {
  return static_cast<uint64_t>(f.integer("received", 0, INT64_MAX));
}

// Parses `text` as JSON and converts it with `convert`; a failed check becomes a ProtocolError.
template <typename Message, typename Convert>
std::variant<Message, ProtocolError> decode_json(std::string_view text, Convert convert) {
  const json j = json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return ProtocolError{"bad_json", "the frame is not valid JSON"};
  try {
    return convert(j);
  } catch (const BadMessage& e) {
    return ProtocolError{"bad_message", e.message};
  } catch (const json::exception& e) {  // a conversion the checks above did not foresee
    return ProtocolError{"bad_message", e.what()};
  }
}

// Invalid UTF-8 (say, a host name echoed in an error) is replaced rather than thrown on.
inline std::string dump(const json& j) {
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace npu_run::rdzv
