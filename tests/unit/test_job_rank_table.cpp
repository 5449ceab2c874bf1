#include <catch2/catch.hpp>

#include "agent/plan/job_rank_table.hpp"

namespace test_job_rank_table {

using namespace npu_run;
using Catch::Matchers::Contains;

namespace {

rdzv::PeerInfo peer(int rank, int offset, const std::string& addr,
                    const std::vector<int>& devices) {
  rdzv::PeerInfo p;
  p.node_rank = rank;
  p.rank_offset = offset;
  p.node.addr = addr;
  p.node.devices = devices;
  for (int d : devices)
    p.node.device_ips.push_back("192.168." + std::to_string(rank) + "." + std::to_string(d));
  p.node.nproc = static_cast<int>(devices.size());
  return p;
}

Assignment node(int rank, int offset, int world) {
  Assignment a;
  a.node_rank = rank;
  a.rank_offset = offset;
  a.world_size = world;
  a.host = "host-" + std::to_string(rank);
  return a;
}

}  // namespace

TEST_CASE("job rank table: servers in node-rank order, rank ids are global ranks", "[rank-table]") {
  const RankTable t =
      rank_table_from_peers({peer(0, 0, "10.0.0.1", {4, 5}), peer(1, 2, "10.0.0.2", {0, 1, 2})});
  REQUIRE(t.servers.size() == 2);
  CHECK(t.servers[1].server_id == "10.0.0.2");
  CHECK(t.servers[1].devices[2].device_id == 2);
  CHECK(t.servers[1].devices[2].rank_id == 4);  // rank offset 2 + local rank 2
  CHECK(t.servers[1].devices[2].device_ip == "192.168.1.2");
  CHECK(rank_table_mismatch(t, "t", node(1, 2, 5), {0, 1, 2}, {"10.0.0.2"}).empty());
}

TEST_CASE("job rank table: a given table must fit this node's ranks", "[rank-table]") {
  const RankTable t =
      rank_table_from_peers({peer(0, 0, "10.0.0.1", {0, 1}), peer(1, 2, "10.0.0.2", {0, 1})});
  // Found by server id, or by node rank when no id matches.
  CHECK(rank_table_mismatch(t, "t.json", node(1, 2, 4), {0, 1}, {"elsewhere"}).empty());
  CHECK_THAT(rank_table_mismatch(t, "t.json", node(0, 0, 6), {0, 1}, {}),
             Contains("rank table t.json lists 4 devices but the job has 6 workers"));
  CHECK_THAT(rank_table_mismatch(t, "t.json", node(1, 2, 4), {1, 0}, {"10.0.0.2"}),
             Contains("server '10.0.0.2' gives device 1 rank_id 3, but this job runs rank 2 on it "
                      "(node 1, local rank 0)"));
  CHECK_THAT(rank_table_mismatch(t, "t.json", node(0, 0, 4), {0, 7}, {"10.0.0.1"}),
             Contains("server '10.0.0.1' has no device 7, which local rank 1 uses"));
  CHECK_THAT(rank_table_mismatch(t, "t.json", node(3, 0, 4), {0}, {"nobody"}),
             Contains("has no server for node 3"));
}

}  // namespace test_job_rank_table
