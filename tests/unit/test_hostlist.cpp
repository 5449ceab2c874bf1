// Hostlist expansion against the real `scontrol show hostnames` (tests/data/hostlist/).
#include <catch2/catch.hpp>
#include <fstream>
#include <set>

#include "basics/usage_error.hpp"
#include "cluster/hostlist.hpp"
#include "support/build_paths.hpp"

namespace test_hostlist {

using namespace npu_run;
using Catch::Matchers::Contains;

namespace {

struct Case {
  std::string expression;
  std::string expected;  // hosts joined by single spaces, or ERROR
};

std::vector<Case> scontrol_cases() {
  std::ifstream in(std::string(testing::build_paths::kTestData) + "/hostlist/scontrol_cases.tsv");
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
  CHECK_THROWS_WITH(expand_hostlist("a[1-65536]b[1-65536]"),
                    Contains("names more than 1000000 hosts, more than any job can have"));
}

TEST_CASE("hostlist: hosts are counted, and too many refused, before any name is made",
          "[hostlist]") {
  CHECK(count_hosts("n[1-3],m[01-02]x[1-2] single") == 8);
  CHECK(count_hosts("") == 0);
  CHECK(count_hosts("a[1-1000]b[1-1000]") == 1'000'000);
  CHECK(expand_hostlist("a[1-1000]b[1-1000]").size() == 1'000'000);
  CHECK_THROWS_WITH(count_hosts("a[1-1000]b[1-1001]"), Contains("names more than 1000000 hosts"));
  CHECK_THROWS_WITH(count_hosts("n[1-2],m[2-1]"), Contains("range '2-1' runs backwards"));
  // Two groups of 65,536 ranges of 65,536 hosts: 2^32 x 2^32 would wrap to 0 in 64 bits.
  std::string group = "[1-65536";
  for (int i = 1; i < 65536; ++i) group += ",1-65536";
  group += "]";
  CHECK_THROWS_WITH(count_hosts("a" + group + "b" + group), Contains("names more than"));
  // Found by fuzzing (41,894,253 hosts): the old cap was reached only after gigabytes of names.
  const char fuzzed[] =
      "n\x01\noee[155\xd1-6553][7e+15\0\0\xb1\xb1\xb1\0\0\0"
      "4\xd1-6553][7]";
  CHECK_THROWS_WITH(expand_hostlist(std::string_view(fuzzed, sizeof fuzzed - 1)),
                    Contains("names more than 1000000 hosts"));
}

TEST_CASE("hostlist: the first host is the master", "[hostlist]") {
  CHECK(first_host("gpu[017-020],gpu001") == "gpu017");
  CHECK(first_host("single") == "single");
  CHECK_THROWS_WITH(first_host(""), Contains("names no host"));
  // Only the first host is made, but a mistake further on is still a mistake.
  CHECK_THROWS_WITH(first_host("n1,m[3-1]"), Contains("range '3-1' runs backwards"));
  CHECK(expand_hostlist("").empty());
}

}  // namespace test_hostlist
