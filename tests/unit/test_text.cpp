#include <catch2/catch.hpp>

#include "basics/text.hpp"

namespace test_text {

using namespace npu_run;

TEST_CASE("split keeps empty items so callers can reject them", "[text]") {
  using V = std::vector<std::string_view>;
  CHECK(split("a,b,c", ',') == V{"a", "b", "c"});
  CHECK(split("a,,b", ',') == V{"a", "", "b"});
  CHECK(split("", ',') == V{""});
  CHECK(split("a,", ',') == V{"a", ""});
  CHECK(split("4-7", '-') == V{"4", "7"});
}

TEST_CASE("parse_integer takes the whole text, in range, or nothing", "[text]") {
  CHECK(parse_integer("42", 0, 100) == 42);
  CHECK(parse_integer("0", 0, 100) == 0);
  CHECK(parse_integer("-3", -5, 5) == -3);
  CHECK_FALSE(parse_integer("", 0, 100));
  CHECK_FALSE(parse_integer("4x", 0, 100));
  CHECK_FALSE(parse_integer(" 4", 0, 100));
  CHECK_FALSE(parse_integer("101", 0, 100));
  CHECK_FALSE(parse_integer("-1", 0, 100));
  CHECK_FALSE(parse_integer("99999999999999999999999", 0, 100));
}

TEST_CASE("printable escapes control characters and keeps the rest", "[text]") {
  CHECK(printable("node[1-2]") == "node[1-2]");
  CHECK(printable(std::string_view("a\0b\nc\x1b[31m\x7f", 11)) == "a\\x00b\\x0ac\\x1b[31m\\x7f");
  CHECK(printable("caf\xc3\xa9") == "caf\xc3\xa9");  // UTF-8 stays readable
}

TEST_CASE("to_hex writes two lowercase digits per byte", "[text]") {
  const unsigned char bytes[] = {0x00, 0x0f, 0xa5, 0xff};
  CHECK(to_hex(bytes, sizeof bytes) == "000fa5ff");
  CHECK(to_hex(bytes, 0).empty());
}

}  // namespace test_text
