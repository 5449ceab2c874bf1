#include <catch2/catch.hpp>

#include "config/line_prefix.hpp"
#include "workers/output_relay.hpp"

using namespace npu_run;
using Catch::Matchers::Contains;

TEST_CASE("prefix templates expand every placeholder", "[prefix]") {
  const PrefixValues v{12, 4, 1, "trainer", "node-a"};
  CHECK(expand_prefix_template(kDefaultPrefixTemplate, v) == "[12]: ");
  CHECK(expand_prefix_template("${host}:${node_rank}/${local_rank} ${role_name}${rank}| ", v) ==
        "node-a:1/4 trainer12| ");
  CHECK(expand_prefix_template("", v).empty());
  CHECK(expand_prefix_template("plain", v) == "plain");
}

TEST_CASE("prefix templates reject unknown or unterminated placeholders", "[prefix]") {
  CHECK_NOTHROW(validate_prefix_template("[${rank}] ", "--log-line-prefix-template"));
  CHECK_THROWS_WITH(validate_prefix_template("[${gpu}]", "--log-line-prefix-template"),
                    Contains("'${gpu}' is not a placeholder"));
  CHECK_THROWS_WITH(validate_prefix_template("[${rank", "--log-line-prefix-template"),
                    Contains("'${rank'"));
}

TEST_CASE("line prefixer prefixes complete lines and keeps partial ones", "[prefix]") {
  LinePrefixer p("[3]: ");
  std::string out;
  p.feed("hello\nwor", out);
  CHECK(out == "[3]: hello\n");
  p.feed("ld\n\nx", out);
  CHECK(out == "[3]: hello\n[3]: world\n[3]: \n");
  p.finish(out);
  CHECK(out == "[3]: hello\n[3]: world\n[3]: \n[3]: x\n");
  std::string none;
  p.finish(none);
  CHECK(none.empty());
}

TEST_CASE("line prefixer flushes an endless line in bounded pieces", "[prefix]") {
  LinePrefixer p(">");
  std::string out;
  p.feed(std::string(size_t{200} * 1024, 'a'), out);
  // Pieces are flushed as soon as they reach the bound, so memory stays bounded.
  CHECK(out.size() >= size_t{128} * 1024);
  CHECK(out.front() == '>');
}
