// `npu_run rank-table`: the classic generator's files, merging, and its error messages.
#include <catch2/catch.hpp>
#include <filesystem>

#include "support/harness.hpp"
#include "support/temp_dir.hpp"

namespace test_rank_table_command {

using namespace npu_run::testing;
using Catch::Matchers::Contains;

namespace {

const std::string kData = source_dir() + "/tests/data/rank_table/";

}  // namespace

TEST_CASE("rank-table command: writes the classic file name and content",
          "[integration][rank-table]") {
  TempDir dir;
  const Finished f = run_npu_run({"rank-table", "--devices", "[0,8)", "--hccn-conf",
                                  kData + "hccn.conf", "--server-id", "127.0.0.1"},
                                 {}, 20s, dir.path());
  INFO(f.err);
  REQUIRE(f.exit_code == 0);
  CHECK_THAT(f.out, Contains("wrote hccl_8p_01234567_127.0.0.1.json (1 server, 8 devices)"));
  CHECK(read_file(dir.file("hccl_8p_01234567_127.0.0.1.json")) ==
        read_file(kData + "hccl_8p_01234567_127.0.0.1.json"));
}

TEST_CASE("rank-table command: devices default to the NPUs found, the server to this host",
          "[integration][rank-table]") {
  TempDir dir;
  TempDir dev;
  for (int i = 4; i < 8; ++i) dev.write("davinci" + std::to_string(i), "");
  const Finished f =
      run_npu_run({"rank-table", "-o", "-"},
                  {{"NPU_RUN_DEV_ROOT", dev.path()}, {"NPU_RUN_HCCN_CONF", kData + "hccn.conf"}},
                  20s, dir.path());
  INFO(f.err);
  REQUIRE(f.exit_code == 0);
  CHECK_THAT(f.out, Contains("\"device_id\": \"4\"") && Contains("\"device_id\": \"7\"") &&
                        Contains("\"server_count\": \"1\""));
  CHECK(f.out.find("\"server_id\": \"\"") == std::string::npos);
}

TEST_CASE("rank-table command: --device-ips instead of hccn.conf, -o to choose the file",
          "[integration][rank-table]") {
  TempDir dir;
  const Finished f =
      run_npu_run({"rank-table", "--devices", "0,1", "--device-ips", "10.9.0.1,10.9.0.2",
                   "--server-id", "node-a", "-o", dir.file("table.json")});
  REQUIRE(f.exit_code == 0);
  const std::string table = read_file(dir.file("table.json"));
  CHECK_THAT(table,
             Contains("\"device_ip\": \"10.9.0.2\"") && Contains("\"server_id\": \"node-a\""));
}

TEST_CASE("rank-table command: --merge renumbers ranks across servers",
          "[integration][rank-table]") {
  TempDir dir;
  const Finished f =
      run_npu_run({"rank-table", "--merge", kData + "hccl_8p_01234567_127.0.0.1.json",
                   kData + "hccl_4p_4567_10.0.0.2.json"},
                  {}, 20s, dir.path());
  INFO(f.err);
  REQUIRE(f.exit_code == 0);
  CHECK_THAT(f.out, Contains("wrote hccl_2s_12p.json (2 servers, 12 devices)"));
  CHECK(read_file(dir.file("hccl_2s_12p.json")) == read_file(kData + "hccl_2s_12p.json"));
}

TEST_CASE("rank-table command: version 1.2 for A3 SuperPoDs", "[integration][rank-table]") {
  const Finished f =
      run_npu_run({"rank-table", "--devices", "0-1", "--hccn-conf", kData + "hccn.conf",
                   "--server-id", "127.0.0.1", "--version", "1.2", "--super-pod-id", "7",
                   "--super-device-ids", "100,101", "-o", "-"});
  REQUIRE(f.exit_code == 0);
  CHECK(f.out == read_file(kData + "hccl_2p_01_127.0.0.1_v1.2.json") + "\n");
}

TEST_CASE("rank-table command: bad input is named with the fix", "[integration][rank-table]") {
  TempDir dir;
  const std::string broken =
      dir.write("hccn.conf", "address_0=192.168.1.1\naddress_1 192.168.1.2\n");
  struct Case {
    std::vector<std::string> args;
    std::string message;
  };
  const std::vector<Case> cases = {
      {{"--devices", "0,9", "--hccn-conf", kData + "hccn.conf"},
       "has no address_9 for the devices asked for"},
      {{"--devices", "0-1", "--hccn-conf", broken},
       broken + ":2: 'address_1 192.168.1.2' has no '='"},
      {{"--devices", "0,1,0", "--hccn-conf", kData + "hccn.conf"}, "device 0 is listed twice"},
      {{"--devices", "0-3", "--device-ips", "10.0.0.1"},
       "--device-ips lists 1 addresses for 4 devices"},
      {{"--devices", "0-1", "--hccn-conf", "/nonexistent"}, "cannot read /nonexistent"},
      {{"--devices", "[3,3)"}, "first < last"},
      {{"--devices", "0-1", "--version", "1.2", "--device-ips", "1.1.1.1,1.1.1.2"},
       "needs --super-device-ids"},
      {{"--devices", "0-1", "--version", "2.0"}, "--version '2.0'"},
      {{"--merge", kData + "hccn.conf"}, "not valid JSON"},
  };
  for (const Case& c : cases) {
    std::vector<std::string> args = {"rank-table"};
    args.insert(args.end(), c.args.begin(), c.args.end());
    const Finished f = run_npu_run(args, {}, 20s, dir.path());
    INFO(c.args.front() << " " << c.args.at(1) << ": " << f.err);
    CHECK(f.exit_code == 2);
    CHECK_THAT(f.err, Contains(c.message));
  }
}

}  // namespace test_rank_table_command
