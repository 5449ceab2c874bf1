#include <catch2/catch.hpp>

#include "config/line_prefix.hpp"
#include "workers/output_relay.hpp"

namespace test_line_prefix {

using namespace npu_run;
using Catch::Matchers::Contains;

TEST_CASE("prefix templates expand every placeholder", "[prefix]") {
  const PrefixValues v{12, 4, 1, "trainer", "node-a"};
  CHECK(expand_prefix_template(kDefaultPrefixTemplate, v) == "[trainer4]:");  // torchrun's
  CHECK(expand_prefix_template("${hostname}", v) == "node-a");  // torchrun 2.x's spelling
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

TEST_CASE("line prefixer prefixes every line as its bytes arrive", "[prefix]") {
  LinePrefixer p("[3]: ");
  std::string out;
  p.feed("hello\nwor", out);
  // The unfinished line is not held back: a worker's partial output reaches the console now.
  CHECK(out == "[3]: hello\n[3]: wor");
  CHECK(p.line_open());
  p.feed("ld\n\nx", out);
  CHECK(out == "[3]: hello\n[3]: world\n[3]: \n[3]: x");
  p.finish(out);
  CHECK(out == "[3]: hello\n[3]: world\n[3]: \n[3]: x\n");
  CHECK_FALSE(p.line_open());
  std::string none;
  p.finish(none);
  CHECK(none.empty());
}

TEST_CASE("line prefixer keeps the prefix on every redraw of a progress bar", "[prefix]") {
  LinePrefixer p("[0]: ");
  std::string out;
  p.feed(" 10%|#", out);
  p.feed("\r 20%|##", out);
  p.feed("\r100%|####\r\n", out);
  // "\r\n" ends the line: no prefix before its '\n'.
  CHECK(out == "[0]:  10%|#\r[0]:  20%|##\r[0]: 100%|####\r\n");
  CHECK_FALSE(p.line_open());
  p.feed("done\r", out);
  CHECK(p.line_open());
}

TEST_CASE("line prefixer holds nothing back however long the line", "[prefix]") {
  LinePrefixer p(">");
  std::string out;
  p.feed(std::string(size_t{200} * 1024, 'a'), out);
  CHECK(out.size() == size_t{200} * 1024 + 1);
  CHECK(out.front() == '>');
}

}  // namespace test_line_prefix
