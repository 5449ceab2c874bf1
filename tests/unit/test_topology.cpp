#include <catch2/catch.hpp>

#include "ascend/topology.hpp"
#include "basics/usage_error.hpp"

namespace test_topology {

using namespace npu_run;
using Catch::Matchers::Contains;

TEST_CASE("topology: atlas-training allows 1, 2, 4 or 8 devices, 2 and 4 inside one ring",
          "[topology]") {
  for (const auto& ok : std::vector<std::vector<int>>{{5},
                                                      {0, 1},
                                                      {2, 3},
                                                      {6, 7},
                                                      {0, 1, 2, 3},
                                                      {4, 5, 6, 7},
                                                      {0, 1, 2, 3, 4, 5, 6, 7},
                                                      {1, 3}}) {
    CHECK_NOTHROW(check_server_devices(Soc::kAtlasTraining, ok));
  }
  CHECK_THROWS_WITH(check_server_devices(Soc::kAtlasTraining, {0, 1, 2}),
                    Contains("devices 0-2: 3 devices per server; this series runs 1, 2, 4 or 8"));
  CHECK_THROWS_WITH(
      check_server_devices(Soc::kAtlasTraining, {3, 4}),
      Contains("devices 3-4 cross the rings {0-3} and {4-7}") && Contains("--devices 0,1"));
  CHECK_THROWS_WITH(check_server_devices(Soc::kAtlasTraining, {2, 3, 4, 5}),
                    Contains("cross the rings") && Contains("--devices 0-3 or --devices 4-7"));
  CHECK_THROWS_WITH(check_server_devices(Soc::kAtlasTraining, {0, 8}),
                    Contains("device 8 does not exist"));
}

TEST_CASE("topology: atlas-a2 and atlas-a3 limit the count per server", "[topology]") {
  CHECK_NOTHROW(check_server_devices(Soc::kAtlasA2, {0, 1, 2}));
  CHECK_NOTHROW(check_server_devices(Soc::kAtlasA2, {3, 4}));
  CHECK_THROWS_WITH(check_server_devices(Soc::kAtlasA2, {9}),
                    Contains("device 9 does not exist on this series (devices 0-7)"));
  CHECK_NOTHROW(check_server_devices(Soc::kAtlasA3, {0, 5, 15}));
  CHECK_THROWS_WITH(check_server_devices(Soc::kAtlasA3, {16}), Contains("devices 0-15"));
  CHECK_NOTHROW(check_server_devices(Soc::kNone, {0, 1, 2, 99}));
}

TEST_CASE("topology: across servers, training needs equal counts, A2/A3 warn", "[topology]") {
  CHECK(check_job_devices(Soc::kAtlasTraining, {8, 8, 8}).error.empty());
  const auto uneven = check_job_devices(Soc::kAtlasTraining, {8, 4});
  CHECK_THAT(uneven.error, Contains("different device counts (node 0: 8, node 1: 4)") &&
                               Contains("the same 1, 2, 4 or 8"));
  const auto a2 = check_job_devices(Soc::kAtlasA2, {8, 6});
  CHECK(a2.error.empty());
  REQUIRE(a2.warnings.size() == 1);
  CHECK_THAT(a2.warnings[0], Contains("node 1: 6") && Contains("recommended"));
  CHECK(check_job_devices(Soc::kNone, {8, 1}).warnings.empty());
  CHECK(check_job_devices(Soc::kAtlasTraining, {3})
            .error.empty());  // single node: the local rules decide
}

TEST_CASE("topology: --soc names", "[topology]") {
  CHECK(parse_soc("atlas-a3", "--soc") == Soc::kAtlasA3);
  CHECK(soc_name(Soc::kAtlasTraining) == "atlas-training");
  CHECK_THROWS_WITH(parse_soc("atlas-910", "--soc"),
                    Contains("--soc 'atlas-910': expected atlas-training"));
}

}  // namespace test_topology
