// A message declared once (rendezvous/protocol/wire_shape.hpp): what each presence writes and
// reads, and that every bound refuses, naming the field.
#include <catch2/catch.hpp>

#include "rendezvous/protocol/wire_shape.hpp"

namespace test_wire_shape {

using namespace npu_run::rdzv;
using Catch::Matchers::Contains;
using wire::field;
using wire::Presence;

namespace {

struct Toy {
  std::string name;
  int count = 3;
  bool loud = false;
  std::string note;
  std::optional<bool> flag;
  std::vector<int> items;
};

json items_json(const std::vector<int>& v) {
  return v;
}
std::vector<int> items_from(const json& array) {
  std::vector<int> out;
  for (const json& x : array) out.push_back(x.get<int>());
  return out;
}

const auto kToy = wire::shape<Toy>(
    "toy", field(&Toy::name, "name", wire::Text{8}),
    field(&Toy::count, "count", wire::Int<int>{1, 9}, Presence::kWhenSet),
    field(&Toy::loud, "loud", wire::Bool{}, Presence::kOptional),
    field(&Toy::note, "note", wire::Text{4}, Presence::kOptional),
    field(&Toy::flag, "flag", wire::Maybe<wire::Bool>{}, Presence::kWhenSet),
    field(&Toy::items, "items", wire::Array<std::vector<int>>{2, items_json, items_from},
          Presence::kWhenSet));

Toy decoded(const json& j) {
  const Fields f(j, "toy message");
  return kToy.decode(f);
}

std::string refusal(const json& j) {
  try {
    decoded(j);
  } catch (const BadMessage& e) {
    return e.message;
  }
  return "(accepted)";
}

}  // namespace

TEST_CASE("wire shape: defaults are left out, optional fields written, the type named",
          "[protocol]") {
  Toy t;
  t.name = "a";
  CHECK(dump(kToy.encode(t)) == R"({"loud":false,"name":"a","note":"","type":"toy"})");
  t.count = 5;
  t.flag = false;  // set, though false
  t.items = {1, 2};
  CHECK(dump(kToy.encode(t)) ==
        R"({"count":5,"flag":false,"items":[1,2],"loud":false,"name":"a","note":"","type":"toy"})");
  const Toy back = decoded(kToy.encode(t));
  CHECK(back.count == 5);
  CHECK(back.flag == std::optional<bool>(false));
  CHECK(back.items == std::vector<int>{1, 2});
}

TEST_CASE("wire shape: what is missing reads as the default, unless it is required", "[protocol]") {
  const Toy t = decoded(json{{"name", "b"}});
  CHECK(t.count == 3);
  CHECK_FALSE(t.loud);
  CHECK_FALSE(t.flag);
  CHECK(refusal(json::object()) == "toy message lacks 'name'");
  CHECK(refusal(json{{"name", nullptr}}) == "toy message lacks 'name'");  // null is missing
}

TEST_CASE("wire shape: every bound refuses, naming the field", "[protocol]") {
  CHECK_THAT(refusal(json{{"name", "123456789"}}), Contains("'name' is longer than 8 bytes"));
  CHECK_THAT(refusal(json{{"name", 7}}), Contains("'name' is not a string"));
  CHECK_THAT(refusal(json{{"name", "a"}, {"count", 10}}), Contains("'count' = 10 is outside 1..9"));
  CHECK_THAT(refusal(json{{"name", "a"}, {"loud", "yes"}}),
             Contains("'loud' is not true or false"));
  CHECK_THAT(refusal(json{{"name", "a"}, {"note", "12345"}}), Contains("'note' is longer than 4"));
  CHECK_THAT(refusal(json{{"name", "a"}, {"items", {1, 2, 3}}}),
             Contains("'items' has more than 2 entries"));
  CHECK_THAT(refusal(json{{"name", "a"}, {"flag", 1}}), Contains("'flag' is not true or false"));
}

TEST_CASE("wire shape: a field left out must compare with its default", "[protocol]") {
  struct Part {
    int x = 0;  // no ==
  };
  struct Holder {
    Part part;
  };
  const auto write = [](const Part&) { return json::object(); };
  const auto read = [](const json&) { return Part{}; };
  CHECK_THROWS_AS(
      field(&Holder::part, "part", wire::Object<Part>{+write, +read}, Presence::kWhenSet),
      std::logic_error);
}

namespace {

enum class Mood { kCalm, kLoud };
const char* mood_name(Mood m) {
  return m == Mood::kCalm ? "calm" : "loud";
}
Mood mood_from(const std::string& name) {
  if (name == "calm") return Mood::kCalm;
  if (name == "loud") return Mood::kLoud;
  throw BadMessage{"unknown mood '" + name + "'"};
}

struct Range {
  int low = 0;
  int high = 0;
  Mood mood = Mood::kCalm;
};

const auto kRange =
    wire::shape<Range>("range", field(&Range::low, "low", wire::Int<int>{0, 9}),
                       field(&Range::high, "high", wire::Int<int>{0, 9}),
                       field(&Range::mood, "mood", wire::Named<Mood>{8, mood_name, mood_from},
                             Presence::kOptional))
        .checked([](const Fields& f, const Range& r) {
          if (r.high < r.low) f.fail("has 'high' below 'low'");
        });

std::string range_refusal(const json& j) {
  try {
    kRange.decode(Fields(j, "range message"));
  } catch (const BadMessage& e) {
    return e.message;
  }
  return "(accepted)";
}

}  // namespace

TEST_CASE("wire shape: a rule across fields, and enums by name", "[protocol]") {
  CHECK(dump(kRange.encode(Range{1, 2, Mood::kLoud})) ==
        R"({"high":2,"low":1,"mood":"loud","type":"range"})");
  CHECK(range_refusal(json{{"low", 3}, {"high", 2}}) == "range message has 'high' below 'low'");
  CHECK(range_refusal(json{{"low", 1}, {"high", 2}, {"mood", "sad"}}) == "unknown mood 'sad'");
  const Range empty_name = kRange.decode(Fields(json{{"low", 1}, {"high", 2}, {"mood", ""}}, "r"));
  CHECK(empty_name.mood == Mood::kCalm);  // as missing
}

}  // namespace test_wire_shape
