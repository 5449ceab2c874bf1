// Where a node sits, as each source says it: npu-smi's spod-info, hccn_tool's LLDP neighbour,
// Slurm's topology address, a --topology file; and the rank tables written for a job seated by
// it (1.0, and 1.2 with super_pod_list on SuperPoDs), against golden files.
#include <catch2/catch.hpp>

#include "agent/plan/job_rank_table.hpp"
#include "basics/usage_error.hpp"
#include "cluster/topology_file.hpp"
#include "health/topology_output.hpp"
#include "support/build_paths.hpp"
#include "support/rdzv_job.hpp"
#include "support/temp_dir.hpp"

namespace test_topology_sources {

using namespace npu_run;
using Catch::Matchers::Contains;
using npu_run::testing::read_file;

namespace {

const std::string kData = std::string(testing::build_paths::kTestData) + "/rank_table/";

// As the A3 documentation and ModelArts' scripts show it (padding varies by driver).
const char* const kSpodInfo =
    "SDID                           : 16777216\n"
    "Super Pod Size                 : 384\n"
    "Super Pod ID                   : 3\n"
    "Server Index                   : 4\n";

// As `hccn_tool -i 3 -lldp -g` prints the neighbour a device heard (tab-indented values).
const char* const kLldp =
    "Chassis ID TLV\n\tMAC: 70:c7:f2:11:22:33\nPort ID TLV\n\tIfname: 400GE1/1/20:2\n"
    "Time to Live TLV\n\t121\nSystem Name TLV\n\tleaf-07\nSystem Description TLV\n"
    "\tVersatile Routing Platform Software\nEnd of LLDPDU TLV\n";

}  // namespace

TEST_CASE("topology sources: npu-smi's spod-info gives the SuperPoD, the server and the SDID",
          "[topology]") {
  const auto info = parse_spod_info(kSpodInfo);
  REQUIRE(info);
  CHECK(info->super_pod_id == "3");
  CHECK(info->server_index == "4");
  CHECK(info->sdid == 16777216);
  // A2 and older: the command is not supported, no SuperPoD.
  CHECK_FALSE(parse_spod_info("This device does not support querying spod-info.\n"));
  CHECK_FALSE(parse_spod_info(""));
  // A bad SDID leaves the SuperPoD known and the SDID not.
  const auto odd = parse_spod_info("SDID : 0x3000000\nSuper Pod ID : 0\n");
  REQUIRE(odd);
  CHECK(odd->super_pod_id == "0");
  CHECK_FALSE(odd->sdid);
}

TEST_CASE("topology sources: the switch a device's port is cabled to, from its LLDP neighbour",
          "[topology]") {
  CHECK(parse_lldp_switch(kLldp) == "leaf-07");
  // Without a System Name TLV the chassis id names the switch.
  CHECK(parse_lldp_switch("Chassis ID TLV\n        MAC: 70:c7:f2:11:22:33\nPort ID TLV\n"
                          "        Ifname: 400GE1/1/20:2\nEnd of LLDPDU TLV\n") ==
        "70:c7:f2:11:22:33");
  // Nothing heard: no switch.
  CHECK_FALSE(parse_lldp_switch(""));
  CHECK_FALSE(parse_lldp_switch("Chassis ID TLV\nPort ID TLV\n"));
}

TEST_CASE("topology sources: Slurm's topology address, read with its pattern", "[topology]") {
  CHECK(slurm_switches("s0.s3.node07", "switch.switch.node") ==
        std::vector<std::string>{"s0", "s3"});
  // The node's own name may hold dots; the switches' never do.
  CHECK(slurm_switches("s1.node7.example.com", "switch.node") == std::vector<std::string>{"s1"});
  // topology/default (no tree): the pattern is just "node", and there are no switches.
  CHECK(slurm_switches("node07", "node").empty());
  CHECK(slurm_switches("s0.node07", "switch.switch.node").empty());  // they disagree
  CHECK(slurm_switches("s0..node07", "switch.switch.node").empty());
}

TEST_CASE("topology sources: a --topology file of HOST PATH lines", "[topology]") {
  const TopologyFile file = parse_topology_file(
      "# rack A\nnode1  pod1/spine0/leaf3\nnode2\tpod1/spine0/leaf4  # the second\n\n"
      "10.0.0.9 pod2/spine1/leaf1\n",
      "--topology t.txt");
  CHECK(topology_of(file, {"node2.example.com", "node2"}) ==
        std::vector<std::string>{"pod1", "spine0", "leaf4"});
  CHECK(topology_of(file, {"host-x", "10.0.0.9"}) ==
        std::vector<std::string>{"pod2", "spine1", "leaf1"});
  CHECK_FALSE(topology_of(file, {"node3"}));
  CHECK_THROWS_WITH(parse_topology_file("node1\n", "--topology t.txt"),
                    Contains("--topology t.txt line 1: 'node1' is not 'HOST PATH'"));
  CHECK_THROWS_WITH(parse_topology_file("a x/y\na x/z\n", "--topology t.txt"),
                    Contains("line 2: a is listed twice"));
  CHECK_THROWS_WITH(parse_topology_file("a x//y\n", "--topology t.txt"),
                    Contains("empty or overlong level"));
  CHECK_THROWS_WITH(parse_topology_file("a 1/2/3/4/5/6/7/8/9\n", "--topology t.txt"),
                    Contains("has 9 levels; at most 8"));
  CHECK_THROWS_WITH(parse_topology_file("# nothing\n", "--topology t.txt"),
                    Contains("lists no node"));
}

namespace {

// The peers a job of four 2-device nodes gets once the rendezvous seated them in topology order.
std::vector<rdzv::PeerInfo> seated_peers(bool superpods) {
  using namespace npu_run::testing::rdzv_job;
  Job job(settings(4));
  const std::vector<std::pair<std::string, std::string>> hosts{
      {"node1", "leaf-b"}, {"node2", "leaf-a"}, {"node3", "leaf-b"}, {"node10", "leaf-a"}};
  std::vector<Outgoing> out;
  for (size_t i = 0; i < hosts.size(); ++i) {
    rdzv::NodeInfo n = node(hosts[i].first);
    n.addr = "10.0.0." + std::to_string(i + 1);
    n.device_ips = {"192.168." + std::to_string(i) + ".10", "192.168." + std::to_string(i) + ".11"};
    n.topology.switches = {"spine", hosts[i].second};
    if (superpods) {
      n.topology.superpod = hosts[i].second == "leaf-a" ? "1" : "2";
      n.topology.super_device_ids = {static_cast<int>(100 + 2 * i), static_cast<int>(101 + 2 * i)};
    }
    job.greet(static_cast<rdzv::ClientId>(i + 1));
    rdzv::Join j = join_as(n, std::nullopt, 4);
    j.want_peers = true;
    out = job.send(static_cast<rdzv::ClientId>(i + 1), j);
  }
  const auto* a = npu_run::testing::message_to<rdzv::Assigned>(out, 1);
  REQUIRE(a != nullptr);
  return a->peers;
}

}  // namespace

TEST_CASE("topology sources: the job's rank table follows the seats, 1.2 on SuperPoDs",
          "[topology][rank-table]") {
  // node2 and node10 share leaf-a, node1 and node3 leaf-b: their servers come in that order.
  const RankTable plain = rank_table_from_peers(seated_peers(false));
  CHECK(rank_table_json(plain) == read_file(kData + "job_topology_v1.0.json"));
  const RankTable pods = rank_table_from_peers(seated_peers(true));
  CHECK(rank_table_json(pods) == read_file(kData + "job_topology_v1.2.json"));
}

}  // namespace test_topology_sources
