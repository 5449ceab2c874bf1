// Ranks placed for the network: the natural order of host names, topology paths, the order of a
// round's seats (--node-order), spares near the lost node, and the logical SuperPoD blocks cut
// for --sp-block (rendezvous/state/node_order.hpp), driven through the state machine.
#include <catch2/catch.hpp>

#include "basics/topology_path.hpp"
#include "rendezvous/protocol/protocol.hpp"
#include "rendezvous/state/node_order.hpp"
#include "support/rdzv_job.hpp"

namespace test_node_order {

using namespace npu_run::rdzv;
using namespace npu_run::testing::rdzv_job;
using Catch::Matchers::Contains;
using npu_run::natural_less;
using npu_run::NodeOrder;
using npu_run::TopologyPath;
using npu_run::testing::message_to;

namespace {

TopologyPath on(std::vector<std::string> switches, std::string superpod = "",
                std::string server = "") {
  TopologyPath p;
  p.superpod = std::move(superpod);
  p.switches = std::move(switches);
  p.server = std::move(server);
  return p;
}

NodeInfo placed(const std::string& host, TopologyPath path, int nproc = 2) {
  NodeInfo n = node(host, nproc);
  n.topology = std::move(path);
  return n;
}

// Joins every node in turn (ids from 1); the host of each seat once the round formed.
std::vector<std::string> seats_of(Job& job, const std::vector<NodeInfo>& nodes) {
  std::vector<Outgoing> out;
  for (size_t i = 0; i < nodes.size(); ++i) out = job.join(static_cast<ClientId>(i + 1), nodes[i]);
  std::vector<std::string> hosts(nodes.size());
  for (size_t i = 0; i < nodes.size(); ++i) {
    const Assigned* a = message_to<Assigned>(out, static_cast<ClientId>(i + 1));
    REQUIRE(a != nullptr);
    hosts[static_cast<size_t>(a->node_rank)] = nodes[i].host;
  }
  return hosts;
}

JobSettings ordered(int nodes, NodeOrder order, int sp_block = 0) {
  JobSettings s = settings(nodes);
  s.node_order = order;
  s.sp_block = sp_block;
  return s;
}

}  // namespace

TEST_CASE("node order: host names in natural order, digit runs as numbers", "[node-order]") {
  CHECK(natural_less("node2", "node10"));
  CHECK_FALSE(natural_less("node10", "node2"));
  CHECK(natural_less("leaf-7", "leaf-8"));
  CHECK(natural_less("a9b", "a10a"));
  CHECK(natural_less("rack1-node9", "rack2-node1"));
  // Leading zeros compare as the number; the order stays total.
  CHECK(natural_less("leaf-07", "leaf-8"));
  CHECK(natural_less("leaf-07", "leaf-7") != natural_less("leaf-7", "leaf-07"));
  CHECK_FALSE(natural_less("x", "x"));
  CHECK(natural_less("", "a"));
}

TEST_CASE("node order: paths level by level, unknown places last", "[node-order]") {
  using npu_run::topology_less;
  CHECK(topology_less(on({"spine0", "leaf2"}), on({"spine0", "leaf10"})));
  CHECK(topology_less(on({"spine0", "leaf9"}), on({"spine1", "leaf0"})));
  CHECK(topology_less(on({}, "1"), on({}, "2")));
  CHECK(topology_less(on({"s"}, "1", "9"), on({"s"}, "1", "10")));
  // A node whose place is known comes before one whose is not, and a longer path before a
  // shorter one it begins with: nodes of unknown place never split a switch's.
  CHECK(topology_less(on({"leaf1"}), on({})));
  CHECK(topology_less(on({"spine0", "leaf1"}), on({"spine0"})));
  CHECK_FALSE(topology_less(on({}), on({})));
  CHECK(on({"spine0", "leaf3"}, "1", "4").describe() ==
        "superpod 1 / switch spine0 > leaf3 / server 4");
  CHECK(TopologyPath{}.describe() == "unknown");
}

TEST_CASE("node order: seats follow the switches, not the host names that interleave them",
          "[node-order][rdzv]") {
  // Host names alternate between the two leaf switches, as a rack's cabling often does.
  const std::vector<NodeInfo> nodes{
      placed("node1", on({"spine", "leaf-b"})), placed("node2", on({"spine", "leaf-a"})),
      placed("node3", on({"spine", "leaf-b"})), placed("node10", on({"spine", "leaf-a"}))};
  Job by_topology(ordered(4, NodeOrder::kTopology));
  CHECK(seats_of(by_topology, nodes) ==
        std::vector<std::string>{"node2", "node10", "node1", "node3"});
  Job by_host(ordered(4, NodeOrder::kHost));
  CHECK(seats_of(by_host, nodes) == std::vector<std::string>{"node1", "node2", "node3", "node10"});
  Job by_arrival(ordered(4, NodeOrder::kArrival));
  CHECK(seats_of(by_arrival, nodes) ==
        std::vector<std::string>{"node1", "node2", "node3", "node10"});
  // Where no node knows its place, topology order is host order.
  const std::vector<NodeInfo> unplaced{node("n10"), node("n9"), node("n1")};
  Job plain(ordered(3, NodeOrder::kTopology));
  CHECK(seats_of(plain, unplaced) == std::vector<std::string>{"n1", "n9", "n10"});
}

TEST_CASE("node order: an explicit --node-rank keeps its seat, the others fill around it",
          "[node-order][rdzv]") {
  Job job(ordered(3, NodeOrder::kTopology));
  job.join(1, placed("z", on({"leaf2"})));
  job.join(2, placed("y", on({"leaf1"})), 0);  // claims seat 0
  const auto out = job.join(3, placed("x", on({"leaf1"})));
  CHECK(message_to<Assigned>(out, 2)->node_rank == 0);
  CHECK(message_to<Assigned>(out, 3)->node_rank == 1);
  CHECK(message_to<Assigned>(out, 1)->node_rank == 2);
}

TEST_CASE("node order: a lost node's seat goes to the spare on its switch",
          "[node-order][spares]") {
  JobSettings s = ordered(2, NodeOrder::kTopology);
  s.spares = 2;
  Job job(s);
  const auto join = [&](ClientId id, const NodeInfo& n) {
    job.greet(id);
    Join j = join_as(n, std::nullopt, 2);
    j.spares = 2;
    return job.send(id, j);
  };
  join(1, placed("a", on({"spine", "leaf1"})));
  join(2, placed("b", on({"spine", "leaf2"})));
  // Two spares stand by; the one on the lost node's switch arrives last and sorts last.
  join(3, placed("c", on({"spine", "leaf1"})));
  join(4, placed("d", on({"spine", "leaf2"})));
  job.state.on_disconnect(2, t0 + 1s);  // b, on leaf2, is lost
  auto out = job.send(1, Report{0, Outcome::kStopped, std::nullopt, 0}, t0 + 1s);
  REQUIRE(message_to<Decision>(out, 1) != nullptr);
  Join again = join_as(placed("a", on({"spine", "leaf1"})), std::nullopt, 2);
  again.spares = 2;
  out = job.send(1, again, t0 + 2s);
  const Assigned* d = message_to<Assigned>(out, 4);
  REQUIRE(d != nullptr);
  CHECK(d->node_rank == 1);
  CHECK(message_to<Assigned>(out, 3) == nullptr);  // c stands by still
}

TEST_CASE("node order: --sp-block cuts logical SuperPoDs of adjacent ranks inside each SuperPoD",
          "[node-order][superpod]") {
  std::vector<NodeInfo> nodes;
  for (const auto& [host, pod] : std::vector<std::pair<std::string, std::string>>{
           {"h1", "2"}, {"h2", "1"}, {"h3", "2"}, {"h4", "1"}}) {
    nodes.push_back(placed(host, on({}, pod), 8));
  }
  Job job(ordered(4, NodeOrder::kTopology, 16));
  std::vector<Outgoing> out;
  for (size_t i = 0; i < nodes.size(); ++i) out = job.join(static_cast<ClientId>(i + 1), nodes[i]);
  std::vector<std::string> blocks(4);
  for (ClientId id = 1; id <= 4; ++id) {
    const Assigned* a = message_to<Assigned>(out, id);
    REQUIRE(a != nullptr);
    blocks[static_cast<size_t>(a->node_rank)] = a->block;
  }
  // SuperPoD 1's two nodes first (h2, h4), one block of 16 devices; then SuperPoD 2's.
  CHECK(blocks == std::vector<std::string>{"1-0", "1-0", "2-0", "2-0"});
  // Without --sp-block no block is cut, and the workers keep what they were given.
  Job plain(ordered(4, NodeOrder::kTopology));
  for (size_t i = 0; i < nodes.size(); ++i)
    out = plain.join(static_cast<ClientId>(i + 1), nodes[i]);
  CHECK(message_to<Assigned>(out, 1)->block.empty());
}

TEST_CASE("node order: nodes that cannot be cut into whole blocks end the job, naming the count",
          "[node-order][superpod]") {
  // Three nodes of 8 devices in SuperPoD 1, one in SuperPoD 2: blocks of 16 cannot be cut.
  Job job(ordered(4, NodeOrder::kTopology, 16));
  job.join(1, placed("h1", on({}, "1"), 8));
  job.join(2, placed("h2", on({}, "1"), 8));
  job.join(3, placed("h3", on({}, "1"), 8));
  const auto out = job.join(4, placed("h4", on({}, "2"), 8));
  const ErrorReply e = error_to(out, 4);
  CHECK(e.code == "sp_block");
  CHECK_THAT(e.message, Contains("--sp-block 16") && Contains("the 3 nodes of SuperPoD 1") &&
                            Contains("24 devices") && Contains("whole blocks of 16"));
  CHECK(job.state.phase() == RendezvousState::Phase::kFinished);
}

TEST_CASE("node order: cut_blocks keeps block ids unique when a SuperPoD's seats are split",
          "[node-order][superpod]") {
  const NodeInfo a = placed("a", on({}, "1"), 8);
  const NodeInfo b = placed("b", on({}, "2"), 8);
  const Blocks blocks = cut_blocks({&a, &b, &a}, 8);
  CHECK(blocks.error.empty());
  CHECK(blocks.ids == std::vector<std::string>{"1-0", "2-0", "1-1"});
  // A block boundary inside a node is refused.
  const NodeInfo c = placed("c", on({}, "1"), 6);
  CHECK_THAT(cut_blocks({&c, &c}, 8).error, Contains("cannot be cut"));
  // Without --sp-block each node's own block, else its SuperPoD.
  NodeInfo d = placed("d", on({}, "3"));
  d.topology.block = "3a";
  CHECK(cut_blocks({&a, &d}, 0).ids == std::vector<std::string>{"1", "3a"});
}

TEST_CASE("node order: a node's place crosses the wire, and a peer's is bounded",
          "[node-order][protocol]") {
  Join j = join_as(placed("a", on({"spine0", "leaf3"}, "7", "4")), std::nullopt, 2);
  j.node.topology.block = "7-1";
  j.node.topology.sources = {"npu-smi", "lldp"};
  j.node.topology.super_device_ids = {16777216, 16777217};
  auto decoded = decode_client_message(encode(ClientMessage{j}));
  REQUIRE(std::holds_alternative<ClientMessage>(decoded));
  const Join back = std::get<Join>(std::get<ClientMessage>(decoded));
  CHECK(back.node.topology.switches == j.node.topology.switches);
  CHECK(back.node.topology.superpod == "7");
  CHECK(back.node.topology.block == "7-1");
  CHECK(back.node.topology.server == "4");
  CHECK(back.node.topology.sources == j.node.topology.sources);
  CHECK(back.node.topology.super_device_ids == j.node.topology.super_device_ids);
  // Nine levels are more than a peer may send.
  Join deep = j;
  deep.node.topology.switches.assign(9, "s");
  decoded = decode_client_message(encode(ClientMessage{deep}));
  REQUIRE(std::holds_alternative<ProtocolError>(decoded));
  CHECK_THAT(std::get<ProtocolError>(decoded).message, Contains("switches"));
}

}  // namespace test_node_order
