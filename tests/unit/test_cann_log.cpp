// HCCL's signatures in the CANN logs (issue 46), each from a fixture written from REFERENCE.md
// section 13 (tests/data/cann_logs): the link or rank at fault, named with what to run.
#include <catch2/catch.hpp>
#include <fstream>
#include <sstream>

#include "health/cann_log.hpp"
#include "support/build_paths.hpp"

namespace test_cann_log {

using namespace npu_run;
using Catch::Matchers::Contains;

namespace {

std::vector<CannFinding> read_fixture(const std::string& name, PlogOwner owner) {
  std::ifstream in(std::string(testing::build_paths::kTestData) + "/cann_logs/" + name);
  std::stringstream text;
  text << in.rdbuf();
  REQUIRE_FALSE(text.str().empty());
  return read_cann_log(text.str(), owner);
}

}  // namespace

TEST_CASE("cann logs: a link that timed out names its peer, its TLS status and the command",
          "[unit][cann-logs]") {
  const auto found = read_fixture("link_tls.log", {12, 5, 16});
  REQUIRE(found.size() == 2);
  CHECK(found[0].text ==
        "rank 12 could not connect to 10.0.1.13:16666, rank 13 (status: time out, TLS status: "
        "mismatch); run `hccn_tool -i 5 -tls -g` on both");
  CHECK(found[0].blamed == std::vector<int>{13});
  CHECK(found[1].text ==
        "EI0006 on rank 12: a socket to a peer timed out while HCCL set up its links");
}

TEST_CASE("cann logs: the topology exchange's root names the ranks it never heard from",
          "[unit][cann-logs]") {
  const auto found = read_fixture("topo_exchange.log", {0, 0, 8});
  REQUIRE_FALSE(found.empty());
  CHECK(found[0].text ==
        "the root of HCCL's topology exchange (rank 0) never heard from ranks 3, 7 (6 of 8 "
        "connected): they did not start, or cannot reach its port");
  CHECK(found[0].blamed == std::vector<int>{3, 7});
}

TEST_CASE("cann logs: a notify wait names the remote rank it waited on", "[unit][cann-logs]") {
  const auto found = read_fixture("notify_wait.log", {3, 3, 8});
  REQUIRE(found.size() == 2);
  CHECK(found[0].text ==
        "rank 3's AllReduce_10.0.1.2%eth0_60000_0_1732780000 waited on remote rank 6 until "
        "HCCL's execution timeout (notify wait; group hccl_world_group of 8 ranks): look at that "
        "rank, or the link to it");
  CHECK(found[0].blamed == std::vector<int>{6});
  CHECK_THAT(found[1].text, Contains("EI0002 on rank 3"));
}

TEST_CASE("cann logs: RDMA completion errors and a heartbeat's lost peer", "[unit][cann-logs]") {
  const auto found = read_fixture("rdma_cqe.log", {4, 1, 16});
  REQUIRE(found.size() == 2);
  CHECK(found[0].text ==
        "rank 4's RDMA retries to 10.0.2.21 were exhausted (cqe status 12): the link or the NPU "
        "at its other end; run `hccn_tool -i 1 -link -g` and `-net_health -g`");
  CHECK_THAT(found[1].text, Contains("HCCL's heartbeat on rank 4 marks a peer lost"));
}

TEST_CASE("cann logs: the firewall hint and a port in use", "[unit][cann-logs]") {
  const auto found = read_fixture("firewall.log", {2, -1, 4});
  REQUIRE(found.size() == 2);
  CHECK_THAT(found[0].text, Contains("HCCL says a firewall may be wrongly configured"));
  CHECK(found[1].text == "EJ0003 on rank 2: HCCL's port is in use on this host");
}

TEST_CASE("cann logs: a healthy log, and an unknown device, say nothing false",
          "[unit][cann-logs]") {
  CHECK(read_fixture("healthy.log", {0, 0, 2}).empty());
  CHECK(read_cann_log("", {}).empty());
  const auto found = read_fixture("link_tls.log", {12, -1, 16});
  CHECK_THAT(found[0].text, Contains("`hccn_tool -i <device> -tls -g`"));
}

}  // namespace test_cann_log
