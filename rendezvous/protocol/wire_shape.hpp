// A message declared once: its wire name and its fields, each with its key, its bounds and how
// it is present, and both directions come from that one declaration. Reading is bounded as
// json_fields.hpp is (nlohmann's NLOHMANN_DEFINE_TYPE_* check neither types nor sizes):
//
//   inline const auto kResumeShape = wire::shape<Resume>("resume",
//       wire::field(&Resume::session, "session", wire::Text{Limits::kMaxNonce}),
//       wire::field(&Resume::received, "received", wire::Int<uint64_t>{0, INT64_MAX}));
//
// A JSON object keeps its keys sorted, so the order of the fields does not change a byte; what
// a field's Presence says does (tests/unit/test_wire_golden.cpp pins the bytes).
#pragma once

#include <concepts>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include "rendezvous/protocol/json_fields.hpp"

namespace npu_run::rdzv::wire {

// How a field is written, and what its absence means when it is read.
enum class Presence {
  kRequired,  // always written; a message without it is refused ("lacks 'key'")
  kOptional,  // always written; missing (from an older peer) reads as the message's default
  kWhenSet,   // written only when it differs from the default; missing reads as the default
};

// ---- codecs: one kind of value each, and its bounds ----

struct Text {
  size_t max;  // bytes
  json to(const std::string& v) const { return v; }
  std::string from(const Fields& f, const char* key) const { return f.text(key, max); }
};

template <typename I>
struct Int {
  int64_t min;
  int64_t max;
  json to(I v) const { return v; }
  I from(const Fields& f, const char* key) const {
    return static_cast<I>(f.integer(key, min, max));
  }
};

// A share: a number from 0 to 1.
struct Fraction {
  json to(double v) const { return v; }
  double from(const Fields& f, const char* key) const {
    const json& v = f.need(key);
    if (!v.is_number() || v.get<double>() < 0 || v.get<double>() > 1)
      f.fail(fmt::format("'{}' is not a number from 0 to 1", key));
    return v.get<double>();
  }
};

struct Bool {
  json to(bool v) const { return v; }
  bool from(const Fields& f, const char* key) const { return f.boolean(key); }
};

// An enum as nlohmann's NLOHMANN_JSON_SERIALIZE_ENUM names it, read back strictly (enum_field).
template <typename E>
struct Enum {
  json to(E v) const { return v; }
  E from(const Fields& f, const char* key) const { return enum_field<E>(f, key); }
};

// An enum by its name, from the enum's own table; an empty name reads as the default, as a
// missing one does.
template <typename E>
struct Named {
  size_t max;
  const char* (*name)(E);
  E (*read)(const std::string&);  // throws BadMessage for a name it does not know
  json to(E v) const { return name(v); }
  E from(const Fields& f, const char* key) const {
    const std::string text = f.text(key, max);
    return text.empty() ? E{} : read(text);
  }
};

// A JSON object, written and read by the part's own functions (wire_parts.hpp).
template <typename T>
struct Object {
  json (*write)(const T&);
  T (*read)(const json&);
  json to(const T& v) const { return write(v); }
  T from(const Fields& f, const char* key) const { return read(f.object(key)); }
};

// A JSON array of at most `max` entries, read whole by the part's own function.
template <typename T>
struct Array {
  size_t max;
  json (*write)(const T&);
  T (*read)(const json& array);
  json to(const T& v) const { return write(v); }
  T from(const Fields& f, const char* key) const { return read(f.array(key, max)); }
};

// A JSON array of at most `max` entries, each written and read by the entry's own functions.
template <typename E>
struct List {
  size_t max;
  json (*write)(const E&);
  E (*read)(const json&);
  json to(const std::vector<E>& v) const {
    json out = json::array();
    for (const E& e : v) out.push_back(write(e));
    return out;
  }
  std::vector<E> from(const Fields& f, const char* key) const {
    std::vector<E> out;
    for (const json& e : f.array(key, max)) out.push_back(read(e));
    return out;
  }
};

// Short texts, as notes are: at most `max` entries of at most `max_bytes` each.
struct TextList {
  size_t max;
  size_t max_bytes;
  json to(const std::vector<std::string>& v) const { return v; }
  std::vector<std::string> from(const Fields& f, const char* key) const {
    std::vector<std::string> out;
    for (const json& e : f.array(key, max)) {
      if (!e.is_string() || e.get_ref<const std::string&>().size() > max_bytes)
        f.fail(fmt::format("'{}' holds a bad entry", key));
      out.push_back(e.get<std::string>());
    }
    return out;
  }
};

// Integers in [min, max], at most `max_entries`; another is "a bad <what>".
struct IntList {
  size_t max_entries;
  int64_t min;
  int64_t max;
  const char* what;
  json to(const std::vector<int>& v) const { return v; }
  std::vector<int> from(const Fields& f, const char* key) const {
    std::vector<int> out;
    for (const json& e : f.array(key, max_entries)) {
      if (!e.is_number_integer() || e.get<int64_t>() < min || e.get<int64_t>() > max)
        f.fail(fmt::format("'{}' holds {}", key, what));
      out.push_back(e.get<int>());
    }
    return out;
  }
};

// A std::optional member: written when it holds a value (Presence::kWhenSet).
template <typename Codec>
struct Maybe {
  Codec codec;
  template <typename V>
  json to(const std::optional<V>& v) const {
    return codec.to(*v);
  }
  auto from(const Fields& f, const char* key) const { return std::optional(codec.from(f, key)); }
};

// ---- fields and shapes ----

// Whether a kWhenSet field is left out: it equals the default; an optional holds nothing; a
// list is empty. Only such values can be kWhenSet (a message part without == is written always).
template <typename V>
constexpr bool kCanBeLeftOut = std::equality_comparable<V>;
template <typename V>
constexpr bool kCanBeLeftOut<std::optional<V>> = true;
template <typename V>
constexpr bool kCanBeLeftOut<std::vector<V>> = true;

template <typename V>
bool is_default(const V& v, const V& default_value) {
  return v == default_value;
}
template <typename V>
bool is_default(const std::optional<V>& v, const std::optional<V>& /*default_value*/) {
  return !v.has_value();
}
template <typename V>  // a message's lists start empty
bool is_default(const std::vector<V>& v, const std::vector<V>& /*default_value*/) {
  return v.empty();
}

template <typename Message, typename Value, typename Codec>
struct Field {
  Value Message::*member;
  const char* key;
  Codec codec;
  Presence presence;
  bool (*written)(const Message&) = nullptr;  // when() another field says so

  // Written only when `rule` holds (a class's reason goes with the class).
  Field when(bool (*rule)(const Message&)) const {
    Field out = *this;
    out.written = rule;
    return out;
  }

  void put(json& j, const Message& m) const {
    if (written != nullptr && !written(m)) return;
    const Value& v = m.*member;
    if constexpr (kCanBeLeftOut<Value>) {
      if (presence == Presence::kWhenSet && is_default(v, Message{}.*member)) return;
    }
    j[key] = codec.to(v);
  }
  void get(const Fields& f, Message& m) const {
    if (f.find(key) == nullptr) {
      if (presence == Presence::kRequired) f.need(key);  // refuses, naming the key
      return;
    }
    m.*member = codec.from(f, key);
  }
};

// A kWhenSet field of a value that cannot be compared with its default is a declaration's
// mistake: refused when the declaration is made (at start-up, messages are declared statically).
template <typename Message, typename Value, typename Codec>
Field<Message, Value, Codec> field(Value Message::*member, const char* key, Codec codec,
                                   Presence presence = Presence::kRequired) {
  if (presence == Presence::kWhenSet && !kCanBeLeftOut<Value>)
    throw std::logic_error(std::string("wire field '") + key + "' cannot be left out");
  return {member, key, codec, presence, nullptr};
}

template <typename Message, typename... F>
struct Shape {
  const char* type;  // nullptr: a part, not a message
  bool answer;       // the server's messages say "ok": true (wire_parts.hpp's answer())
  std::tuple<F...> fields;
  // What no one field can say (one field bounded by another): refuses with f.fail().
  void (*check)(const Fields& f, const Message& m) = nullptr;

  Shape checked(void (*rule)(const Fields&, const Message&)) const {
    Shape out = *this;
    out.check = rule;
    return out;
  }

  json encode(const Message& m) const {
    json j = json::object();
    if (type != nullptr) j["type"] = type;
    if (answer) j["ok"] = true;
    std::apply([&](const auto&... f) { (f.put(j, m), ...); }, fields);
    return j;
  }
  // `f` is the message's object, its type already read.
  Message decode(const Fields& f) const {
    Message m{};
    std::apply([&](const auto&... field) { (field.get(f, m), ...); }, fields);
    if (check != nullptr) check(f, m);
    return m;
  }
};

// An agent's message.
template <typename Message, typename... F>
Shape<Message, F...> shape(const char* type, F... fields) {
  return {type, false, {fields...}, nullptr};
}

// A part of messages (a peer of an assignment): an object without a type.
template <typename Message, typename... F>
Shape<Message, F...> part(F... fields) {
  return {nullptr, false, {fields...}, nullptr};
}

// The server's: an answer, with "ok": true.
template <typename Message, typename... F>
Shape<Message, F...> answer_shape(const char* type, F... fields) {
  return {type, true, {fields...}, nullptr};
}

}  // namespace npu_run::rdzv::wire
