// Ascend conventions in the launcher: rank tables (generated or given) and topology rules.
#include <catch2/catch.hpp>
#include <filesystem>
#include <set>

#include "support/harness.hpp"
#include "support/temp_dir.hpp"

namespace test_ascend {

using namespace npu_run::testing;
using Catch::Matchers::Contains;

namespace {

const std::string kData = source_dir() + "/tests/data/rank_table/";

// Each worker finds its own entry in RANK_TABLE_FILE by RANK_ID and checks it is its DEVICE_ID,
// then prints the file's digest so that tests can compare the files of different nodes.
const std::string kCheckTable =
    "import hashlib, json, os\n"
    "path = os.environ['RANK_TABLE_FILE']\n"
    "text = open(path).read()\n"
    "table = json.loads(text)\n"
    "mine = [(s['server_id'], d) for s in table['server_list'] for d in s['device'] if "
    "d['rank_id'] == os.environ['RANK_ID']]\n"
    "assert len(mine) == 1, mine\n"
    "server, device = mine[0]\n"
    "assert device['device_id'] == os.environ['DEVICE_ID'], (device, os.environ['DEVICE_ID'])\n"
    "print('rank %s device %s ip %s server %s table %s' % (os.environ['RANK_ID'], "
    "device['device_id'], device['device_ip'],"
    " server, hashlib.sha1(text.encode()).hexdigest()[:12]))\n";

std::vector<std::string> python_workers(std::vector<std::string> flags, const std::string& script) {
  flags.emplace_back("--no-python");
  flags.emplace_back("/usr/bin/python3");
  flags.emplace_back("-c");
  flags.push_back(script);
  return flags;
}

std::set<std::string> digests(const std::string& out) {
  std::set<std::string> found;
  for (auto pos = out.find(" table "); pos != std::string::npos;
       pos = out.find(" table ", pos + 1)) {
    found.insert(out.substr(pos + 7, 12));
  }
  return found;
}

}  // namespace

TEST_CASE("ascend: --rank-table auto on one node exports a table whose rank ids are RANK_ID",
          "[integration][ascend]") {
  const Finished f =
      run_npu_run(python_workers({"--nproc-per-node", "2", "--devices", "6,7", "--rank-table",
                                  "auto", "--hccn-conf", kData + "hccn.conf"},
                                 kCheckTable));
  INFO(f.err);
  REQUIRE(f.exit_code == 0);
  CHECK_THAT(f.out, Contains("rank 0 device 6 ip 192.168.102.100") &&
                        Contains("rank 1 device 7 ip 192.168.103.100"));
  CHECK(digests(f.out).size() == 1);
}

TEST_CASE("ascend: a given rank table that fits the job is exported", "[integration][ascend]") {
  const Finished f =
      run_npu_run(python_workers({"--nproc-per-node", "4", "--devices", "4-7", "--rank-table",
                                  kData + "hccl_4p_4567_127.0.0.1.json"},
                                 kCheckTable));
  INFO(f.err);
  REQUIRE(f.exit_code == 0);
  for (int rank = 0; rank < 4; ++rank) {
    CHECK_THAT(f.out,
               Contains("rank " + std::to_string(rank) + " device " + std::to_string(rank + 4)));
  }
}

TEST_CASE("ascend: a rank table that does not fit stops the job before any worker starts",
          "[integration][ascend]") {
  TempDir dir;
  const Finished f = run_npu_run({"--nproc-per-node", "4", "--devices", "0-3", "--max-restarts",
                                  "2", "--rank-table", kData + "hccl_4p_4567_127.0.0.1.json",
                                  "--no-python", "/bin/sh", "-c", "touch " + dir.file("started")});
  CHECK(f.exit_code == 2);
  CHECK_THAT(f.err, Contains("has no device 0, which local rank 0 uses") &&
                        Contains("npu_run rank-table"));
  CHECK(f.err.find("restart") == std::string::npos);  // a restart could not fix it
  CHECK_FALSE(std::filesystem::exists(dir.file("started")));
}

TEST_CASE("ascend: --rank-table auto across two nodes gives both the same table",
          "[integration][ascend]") {
  const int port = unused_port();
  auto node = [&](const std::string& devices, int rank) {
    return std::make_unique<NpuRunProcess>(
        python_workers({"--nnodes", "2", "--node-rank", std::to_string(rank), "--master-port",
                        std::to_string(port), "--nproc-per-node", "2", "--devices", devices,
                        "--rank-table", "auto", "--hccn-conf", kData + "hccn.conf"},
                       kCheckTable));
  };
  auto a = node("0,1", 0);
  auto b = node("4,5", 1);
  const auto done = NpuRunProcess::wait_all({a.get(), b.get()}, 60s);
  INFO(done[0].err << "\n----\n" << done[1].err);
  CHECK(done[0].exit_code == 0);
  CHECK(done[1].exit_code == 0);
  CHECK_THAT(done[1].out,
             Contains("rank 2 device 4 ip 192.168.100.100") && Contains("rank 3 device 5"));
  // Identical tables on both nodes.
  const auto all = digests(done[0].out + done[1].out);
  CHECK(all.size() == 1);
  require_no_strays(*a);
  require_no_strays(*b);
}

TEST_CASE("ascend: --soc atlas-training refuses servers with different device counts",
          "[integration][ascend]") {
  const int port = unused_port();
  auto node = [&](const std::string& nproc, int rank) {
    return std::make_unique<NpuRunProcess>(std::vector<std::string>{
        "--nnodes", "2", "--node-rank", std::to_string(rank), "--master-port", std::to_string(port),
        "--nproc-per-node", nproc, "--soc", "atlas-training", "--max-restarts", "3", "--no-python",
        "/bin/true"});
  };
  auto a = node("2", 0);
  auto b = node("1", 1);
  const auto done = NpuRunProcess::wait_all({a.get(), b.get()}, 60s);
  for (const Finished& f : done) {
    INFO(f.err);
    CHECK(f.exit_code == 2);
    CHECK_THAT(f.err, Contains("different device counts (node 0: 2, node 1: 1)"));
    CHECK(f.err.find("restart 1") == std::string::npos);
  }
}

}  // namespace test_ascend
