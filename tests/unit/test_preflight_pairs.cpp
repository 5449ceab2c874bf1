// The pre-flight probe's pairing (rendezvous/state/preflight_pairs.hpp): a slow node or a slow link
// found in at most two rounds, named with its figures; a slow matmul named at once; a healthy
// job's spread never.
#include <catch2/catch.hpp>

#include "rendezvous/state/preflight_pairs.hpp"

namespace test_preflight_pairs {

using namespace npu_run::rdzv;
using Catch::Matchers::Contains;

namespace {

// Round 1's times: 0.10 s per group, but groups holding `slow_node` take `factor` times as long.
std::vector<GroupTime> timed(const std::vector<ProbeGroup>& groups, int slow_node, double factor,
                             std::pair<int, int> slow_link = {-1, -1}) {
  std::vector<GroupTime> out;
  for (const ProbeGroup& g : groups) {
    const bool has = std::find(g.begin(), g.end(), slow_node) != g.end();
    const bool link = g.size() == 2 && ((g[0] == slow_link.first && g[1] == slow_link.second) ||
                                        (g[1] == slow_link.first && g[0] == slow_link.second));
    out.push_back({g, 0.10 * (has || link ? factor : 1.0) + 0.001 * g.front(), false});
  }
  return out;
}

}  // namespace

TEST_CASE("preflight: neighbours pair up, an odd last node joins the first pair", "[preflight]") {
  CHECK(first_round(1).empty());
  CHECK(first_round(2) == std::vector<ProbeGroup>{{0, 1}});
  CHECK(first_round(5) == std::vector<ProbeGroup>{{0, 1, 4}, {2, 3}});
  CHECK(first_round(16).size() == 8);
}

TEST_CASE("preflight: a slow node is found in two rounds of pairing, whatever the size",
          "[preflight]") {
  for (const int nodes : {4, 5, 16}) {
    const std::vector<double> matmul(static_cast<size_t>(nodes), 0.05);
    const auto first = timed(first_round(nodes), 3, 3.0);
    const ProbeFindings round1 = judge_probe(matmul, first);
    CHECK(round1.slow_nodes.empty());
    REQUIRE(round1.next_round.size() == 2);  // node 3 and its partner 2, each with a good node
    const ProbeFindings round2 = judge_probe(matmul, first, timed(round1.next_round, 3, 3.0));
    CHECK(round2.next_round.empty());
    CHECK(round2.slow_nodes == std::vector<int>{3});
    CHECK(round2.slow_links.empty());
    REQUIRE(round2.lines.size() == 1);
    CHECK_THAT(round2.lines[0],
               Contains("node 3: all_gather with good node") && Contains("x the median"));
  }
}

TEST_CASE("preflight: a slow link, a slow matmul, a failure, and a healthy spread", "[preflight]") {
  const std::vector<double> matmul(8, 0.05);
  // The link between 4 and 5 is slow; both are fine with other partners.
  const auto first = timed(first_round(8), -1, 3.0, {4, 5});
  const ProbeFindings round1 = judge_probe(matmul, first);
  REQUIRE(round1.next_round.size() == 2);
  const ProbeFindings round2 = judge_probe(matmul, first, timed(round1.next_round, -1, 1.0));
  CHECK(round2.slow_nodes.empty());
  CHECK(round2.slow_links == std::vector<std::pair<int, int>>{{4, 5}});
  CHECK_THAT(round2.lines.back(), Contains("nodes 4+5: all_gather") && Contains("both fine"));
  // A node whose matmul takes 2.5x the median is named at once, and its pair not re-probed.
  std::vector<double> slow_matmul(8, 0.05);
  slow_matmul[6] = 0.125;
  const ProbeFindings alone = judge_probe(slow_matmul, timed(first_round(8), 6, 2.5));
  CHECK(alone.slow_nodes == std::vector<int>{6});
  CHECK_THAT(alone.lines[0], Contains("node 6: matmul 0.125 s, 2.5x the median 0.050 s"));
  REQUIRE(alone.next_round.size() == 1);  // only its partner, 7, is probed again
  CHECK(alone.next_round[0].back() == 7);
  // A failed group is slow.
  auto failed = timed(first_round(4), -1, 1.0);
  failed[1].failed = true;
  CHECK(judge_probe(std::vector<double>(4, 0.05), failed).next_round.size() == 2);
  // Two nodes: the slower matmul is found; a healthy spread (up to 1.9x) never.
  CHECK(judge_probe({0.05, 0.2}, timed(first_round(2), -1, 1.0)).slow_nodes == std::vector<int>{1});
  const ProbeFindings healthy =
      judge_probe({0.05, 0.06, 0.09, 0.05}, timed(first_round(4), 1, 1.9));
  CHECK(healthy.slow_nodes.empty());
  CHECK(healthy.next_round.empty());
  // Every group slow: nothing to compare with, and said so.
  auto all_failed = timed(first_round(4), -1, 1.0);
  for (GroupTime& g : all_failed) g.failed = true;
  CHECK_THAT(judge_probe(std::vector<double>(4, 0.05), all_failed).lines.at(0),
             Contains("every group of the probe was slow or failed"));
}

}  // namespace test_preflight_pairs
