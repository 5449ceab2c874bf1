// Rank tables against golden files: the classic generator's own output (from the Ascend docs)
// and tables serialized by Python's json.dump(indent=4).
#include <catch2/catch.hpp>

#include "ascend/hccn_conf.hpp"
#include "ascend/rank_table.hpp"
#include "basics/usage_error.hpp"
#include "support/build_paths.hpp"
#include "support/temp_dir.hpp"

namespace test_rank_table {

using namespace npu_run;
using Catch::Matchers::Contains;
using npu_run::testing::read_file;

namespace {

const std::string kData = std::string(testing::build_paths::kTestData) + "/rank_table/";

ServerDevices local_server(std::vector<int> devices) {
  return ServerDevices{"127.0.0.1", std::move(devices), read_hccn_conf(kData + "hccn.conf"), {}};
}

}  // namespace

TEST_CASE("hccn.conf: address_N lines give device addresses, other keys are ignored",
          "[rank-table]") {
  const auto ips = read_hccn_conf(kData + "hccn.conf");
  REQUIRE(ips.size() == 8);
  CHECK(ips.at(0) == "192.168.100.101");
  CHECK(ips.at(7) == "192.168.103.100");
  const auto spaced =
      parse_hccn_conf("  address_3 = 10.0.0.3 \r\n# a comment\nnetmask_3=255.0.0.0\n", "x");
  CHECK(spaced.at(3) == "10.0.0.3");
  CHECK(parse_hccn_conf("", "empty").empty());
}

TEST_CASE("hccn.conf: malformed lines are named by file and line", "[rank-table]") {
  CHECK_THROWS_WITH(parse_hccn_conf("netmask_0=1\naddress_0 10.0.0.1\n", "/etc/hccn.conf"),
                    Contains("/etc/hccn.conf:2: 'address_0 10.0.0.1' has no '='"));
  CHECK_THROWS_WITH(parse_hccn_conf("address_x=10.0.0.1\n", "f"),
                    Contains("f:1:") && Contains("'x' is not a device id"));
  CHECK_THROWS_WITH(parse_hccn_conf("address_0=10.0.0.300\n", "f"),
                    Contains("f:1:") && Contains("'10.0.0.300' is not an IP"));
  CHECK_THROWS_WITH(parse_hccn_conf("address_0=10.0.0.1\n\naddress_0=10.0.0.2\n", "f"),
                    Contains("f:3: address_0 is given again (first on line 1)"));
  CHECK_THROWS_WITH(read_hccn_conf("/nonexistent/hccn.conf"),
                    Contains("cannot read /nonexistent/hccn.conf") && Contains("--device-ips"));
}

TEST_CASE("rank table: 8 devices, byte for byte the classic generator's file", "[rank-table]") {
  const RankTable t = build_rank_table({local_server({0, 1, 2, 3, 4, 5, 6, 7})});
  CHECK(rank_table_json(t) == read_file(kData + "hccl_8p_01234567_127.0.0.1.json"));
  CHECK(classic_file_name(t) == "hccl_8p_01234567_127.0.0.1.json");
}

TEST_CASE("rank table: a 4-device job on devices 4-7 numbers ranks from 0", "[rank-table]") {
  const RankTable t = build_rank_table({local_server({4, 5, 6, 7})});
  CHECK(rank_table_json(t) == read_file(kData + "hccl_4p_4567_127.0.0.1.json"));
  CHECK(classic_file_name(t) == "hccl_4p_4567_127.0.0.1.json");
  CHECK(t.servers[0].devices[0].device_id == 4);
  CHECK(t.servers[0].devices[0].rank_id == 0);
}

TEST_CASE("rank table: merging two servers renumbers ranks in server order", "[rank-table]") {
  const RankTable merged =
      merge_rank_tables({read_rank_table(kData + "hccl_8p_01234567_127.0.0.1.json"),
                         read_rank_table(kData + "hccl_4p_4567_10.0.0.2.json")});
  CHECK(rank_table_json(merged) == read_file(kData + "hccl_2s_12p.json"));
  CHECK(merged_file_name(merged) == "hccl_2s_12p.json");
  CHECK(merged.servers[1].devices[0].rank_id == 8);
}

TEST_CASE("rank table: version 1.2 adds super device ids and the SuperPoD", "[rank-table]") {
  ServerDevices s = local_server({0, 1});
  s.super_device_ids = {{0, 100}, {1, 101}};
  const RankTable t = build_rank_table({s}, "1.2", "7");
  CHECK(rank_table_json(t) == read_file(kData + "hccl_2p_01_127.0.0.1_v1.2.json"));
  const RankTable back = read_rank_table(kData + "hccl_2p_01_127.0.0.1_v1.2.json");
  CHECK(back.version == "1.2");
  CHECK(back.servers[0].devices[1].super_device_id == 101);
  REQUIRE(back.super_pods.size() == 1);
  CHECK(back.super_pods[0].server_ids == std::vector<std::string>{"127.0.0.1"});
  s.super_device_ids.erase(1);
  CHECK_THROWS_WITH(build_rank_table({s}, "1.2"),
                    Contains("no super device id for device 1") && Contains("npu-smi"));
}

TEST_CASE("rank table: missing addresses and duplicate devices are refused", "[rank-table]") {
  CHECK_THROWS_WITH(build_rank_table({local_server({0, 8})}), Contains("no address for device 8"));
  CHECK_THROWS_WITH(build_rank_table({local_server({1, 2, 1})}),
                    Contains("device 1 is listed twice"));
}

TEST_CASE("rank table: reading checks the format and names the place", "[rank-table]") {
  CHECK_THROWS_WITH(parse_rank_table("[]", "t.json"), Contains("t.json: not a JSON object"));
  // Found by fuzz_rank_table: a number overflowing double escaped as a JSON exception.
  CHECK_THROWS_WITH(parse_rank_table("18.8e8888888888", "t.json"),
                    Contains("t.json: holds a number out of any range"));
  CHECK_THROWS_WITH(parse_rank_table("{\"version\": \"1.0\", ", "t.json"),
                    Contains("t.json: not valid JSON (the text stops making sense at byte 20)"));
  CHECK_THROWS_WITH(
      parse_rank_table(
          R"({"version":"2.0","status":"completed","server_count":"0","server_list":[]})",
          "t.json"),
      Contains("version '2.0' is not supported"));
  CHECK_THROWS_WITH(
      parse_rank_table(
          R"({"version":"1.0","status":"initializing","server_count":"0","server_list":[]})",
          "t.json"),
      Contains("status is 'initializing'"));
  CHECK_THROWS_WITH(
      parse_rank_table(
          R"({"version":"1.0","status":"completed","server_count":"2","server_list":[]})",
          "t.json"),
      Contains("server_count is 2 but server_list has 0 servers"));
  const std::string two_rank0 =
      R"({"version":"1.0","status":"completed","server_count":"1","server_list":[{"server_id":"s",
    "device":[{"device_id":"0","device_ip":"1.1.1.1","rank_id":"0"},{"device_id":"1","device_ip":"1.1.1.2","rank_id":"0"}]}]})";
  CHECK_THROWS_WITH(parse_rank_table(two_rank0, "t.json"),
                    Contains("t.json: server_list[0].device[1]: rank_id 0 is given to both device "
                             "0 of server s and device 1"));
  const std::string gap =
      R"({"version":"1.0","status":"completed","server_count":"1","server_list":[{"server_id":"s",
    "device":[{"device_id":"0","device_ip":"1.1.1.1","rank_id":"0"},{"device_id":"1","device_ip":"1.1.1.2","rank_id":"5"}]}]})";
  CHECK_THROWS_WITH(parse_rank_table(gap, "t.json"),
                    Contains("rank ids must run from 0 to 1 without gaps"));
  const std::string bad_number =
      R"({"version":"1.0","status":"completed","server_count":"1","server_list":[{"server_id":"s",
    "device":[{"device_id":"zero","device_ip":"1.1.1.1","rank_id":"0"}]}]})";
  CHECK_THROWS_WITH(parse_rank_table(bad_number, "t.json"),
                    Contains("'device_id' = \"zero\" is not a number"));
  // merge_hccl.py writes rank ids as numbers: accepted.
  const std::string numeric =
      R"({"version":"1.0","status":"completed","server_count":"1","server_list":[{"server_id":"s",
    "device":[{"device_id":"0","device_ip":"1.1.1.1","rank_id":0}]}]})";
  CHECK(parse_rank_table(numeric, "t.json").servers[0].devices[0].rank_id == 0);
  CHECK_THROWS_WITH(read_rank_table("/nonexistent.json"),
                    Contains("cannot read the rank table /nonexistent.json"));
}

TEST_CASE("rank table: the classic half-open first,last device range", "[rank-table]") {
  CHECK(parse_half_open_range("[0,8)", "--devices") == std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7});
  CHECK(parse_half_open_range("[4,8)", "--devices") == std::vector<int>{4, 5, 6, 7});
  CHECK(parse_half_open_range("[8,16)", "--devices")->size() == 8);
  CHECK_FALSE(parse_half_open_range("4-7", "--devices"));
  CHECK_THROWS_WITH(parse_half_open_range("[4,4)", "--devices"), Contains("first < last"));
}

}  // namespace test_rank_table
