// Hostlist expansion against the real `scontrol show hostnames` (tests/data/hostlist/).
#include <catch2/catch.hpp>
#include <fstream>
#include <set>

#include "npu_run/hostlist.hpp"
#include "npu_run/usage_error.hpp"

using namespace npu_run;
using Catch::Matchers::Contains;

namespace {

struct Case {
  std::string expression;
  std::string expected;  // hosts joined by single spaces, or ERROR
};

std::vector<Case> scontrol_cases() {
  std::ifstream in(std::string(NPU_RUN_TEST_DATA) + "/hostlist/scontrol_cases.tsv");
  std::vector<Case> cases;
  for (std::string line; std::getline(in, line);) {
    const auto tab = line.rfind('\t');  // expressions may hold tabs; scontrol's output never does
    if (tab != std::string::npos) cases.push_back({line.substr(0, tab), line.substr(tab + 1)});
  }
  return cases;
}

std::string joined(const std::vector<std::string>& hosts) {
  std::string out;
  for (const auto& h : hosts) out += (out.empty() ? "" : " ") + h;
  return out;
}

// Where npu_run refuses on purpose what scontrol turns into a mangled name.
const std::set<std::string> kDeliberatelyRejected = {"node[1-3"};

}  // namespace

TEST_CASE("hostlist: every case recorded from scontrol expands the same way", "[hostlist]") {
  const auto cases = scontrol_cases();
  REQUIRE(cases.size() >= 30);
  int valid = 0;
  int invalid = 0;
  for (const Case& c : cases) {
    INFO("expression: '" << c.expression << "', scontrol: " << c.expected);
    if (c.expected == "ERROR" || kDeliberatelyRejected.count(c.expression)) {
      CHECK_THROWS_AS(expand_hostlist(c.expression), UsageError);
      ++invalid;
    } else {
      CHECK(joined(expand_hostlist(c.expression)) == c.expected);
      ++valid;
    }
  }
  CHECK(valid >= 20);
  CHECK(invalid >= 10);
}

TEST_CASE("hostlist: errors name the expression and the bad part", "[hostlist]") {
  CHECK_THROWS_WITH(expand_hostlist("node[3-1]"),
                    Contains("invalid hostlist 'node[3-1]': range '3-1' runs backwards"));
  CHECK_THROWS_WITH(expand_hostlist("node[a-c]"), Contains("'a-c' is not a number or a range"));
  CHECK_THROWS_WITH(expand_hostlist("node[1-2]x"), Contains("has 'x' after its last ']'"));
  CHECK_THROWS_WITH(expand_hostlist("node[1-3"), Contains("opens a '[' it never closes"));
  CHECK_THROWS_WITH(expand_hostlist("node[1-65537]"), Contains("holds more than 65536 hosts"));
  CHECK_THROWS_WITH(expand_hostlist("a[1-65536]b[1-65536]"), Contains("expands to more than"));
}

TEST_CASE("hostlist: the first host is the master", "[hostlist]") {
  CHECK(first_host("gpu[017-020],gpu001") == "gpu017");
  CHECK(first_host("single") == "single");
  CHECK_THROWS_WITH(first_host(""), Contains("names no host"));
  CHECK(expand_hostlist("").empty());
}
