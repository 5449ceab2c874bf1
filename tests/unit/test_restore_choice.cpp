// Which step a round restores (rendezvous/state/restore_choice.hpp): memory when every rank's seat
// holds one same step (its own agent's, or a copy another agent holds), else storage, else nothing;
// the joins and assignments that carry it on the wire, and the state machine that puts it, the
// ranks to fetch and the ring's next copy port in every node's assignment.
#include <catch2/catch.hpp>

#include "rendezvous/protocol/protocol.hpp"
#include "rendezvous/state/restore_choice.hpp"
#include "rendezvous/state/state.hpp"

namespace test_restore_choice {

using namespace npu_run::rdzv;
using Catch::Matchers::Contains;

namespace {

SnapshotRange range(int first, int last, std::vector<int64_t> memory,
                    std::vector<int64_t> stored = {}) {
  return SnapshotRange{first, last, std::move(memory), std::move(stored)};
}

HeldSnapshots held(int world, std::vector<SnapshotRange> ranges) {
  return HeldSnapshots{world, std::move(ranges)};
}

SeatHolding seat(int node, int offset, int nproc, const HeldSnapshots* h) {
  return SeatHolding{
      node, offset, nproc, "host-" + std::to_string(node), h, "10.0.0." + std::to_string(node)};
}

RestorePoint restore(const std::vector<SeatHolding>& seats, int world_size) {
  return choose_restore(seats, world_size).point;
}

HeldSnapshots with_copies(HeldSnapshots h, std::vector<SnapshotRange> copies, int port) {
  h.copies = std::move(copies);
  h.copy_port = port;
  return h;
}

}  // namespace

TEST_CASE("restore: the newest step every rank holds in memory", "[unit][snapshots]") {
  const HeldSnapshots a = held(4, {range(0, 1, {35, 40})});
  // Rank 3 died in the middle of its save of step 40: it holds 35 only.
  const HeldSnapshots b = held(4, {range(2, 2, {35, 40}), range(3, 3, {35})});
  const RestorePoint p = restore({seat(0, 0, 2, &a), seat(1, 2, 2, &b)}, 4);
  CHECK(p.source == RestoreSource::kMemory);
  CHECK(p.step == 35);
  CHECK_THAT(p.why, Contains("every rank holds step 35 in memory"));
  // Both hold 40: the newer.
  const HeldSnapshots c = held(4, {range(2, 3, {35, 40})});
  CHECK(restore({seat(0, 0, 2, &a), seat(1, 2, 2, &c)}, 4).step == 40);
}

TEST_CASE("restore: nothing saved through npu_run yet is no restore and no word",
          "[unit][snapshots]") {
  const RestorePoint p = restore({seat(0, 0, 2, nullptr), seat(1, 2, 2, nullptr)}, 4);
  CHECK(p.source == RestoreSource::kNone);
  CHECK(p.step == -1);
  CHECK(p.why.empty());
}

TEST_CASE("restore: a new agent in a seat, storage has every rank's step", "[unit][snapshots]") {
  const HeldSnapshots a = held(4, {range(0, 1, {35, 40}, {30, 35, 40})});
  // Node 1 is a spare (nothing held); the lost node had written ranks 2-3 up to step 35 and
  // said so in its join of the round before: what the spare holds is nothing, so the storage
  // steps known are ranks 0-1's only, and no step covers every rank.
  const RestorePoint none = restore({seat(0, 0, 2, &a), seat(1, 2, 2, nullptr)}, 4);
  CHECK(none.source == RestoreSource::kNone);
  CHECK_THAT(none.why, Contains("host-1 (node 1) holds no snapshot of ranks 2-3 in memory"));
  CHECK_THAT(none.why, Contains("no one step was written to storage for every rank"));
  // An agent in its own seat that holds nothing in memory (a restart to nothing dropped it)
  // still says what it wrote to storage: storage serves once every rank's step is known.
  const HeldSnapshots b = held(4, {range(2, 3, {}, {30, 35})});
  const RestorePoint stored = restore({seat(0, 0, 2, &a), seat(1, 2, 2, &b)}, 4);
  CHECK(stored.source == RestoreSource::kStorage);
  CHECK(stored.step == 35);
  CHECK_THAT(stored.why, Contains("no one step is held in memory by every rank"));
  CHECK_THAT(stored.why, Contains("every rank's step 35 is on storage"));
}

TEST_CASE("restore: seats that moved hold other ranks than their snapshots'", "[unit][snapshots]") {
  // Node 1's agent held ranks 2-3 and now sits at offset 0: its memory is of the wrong ranks.
  const HeldSnapshots a = held(4, {range(0, 1, {40}, {40})});
  const HeldSnapshots b = held(4, {range(2, 3, {40}, {40})});
  const RestorePoint p = restore({seat(0, 0, 2, &b), seat(1, 2, 2, &a)}, 4);
  CHECK(p.source == RestoreSource::kStorage);  // storage is anyone's to read
  CHECK(p.step == 40);
}

TEST_CASE("restore: another world size restores from storage and says why", "[unit][snapshots]") {
  const HeldSnapshots a = held(6, {range(0, 1, {40}, {35, 40})});
  const HeldSnapshots b = held(6, {range(2, 3, {40}, {35, 40})});
  const HeldSnapshots c = held(6, {range(4, 5, {40}, {35})});
  // The node with ranks 4-5 left; the world is 4 now.
  const RestorePoint p = restore({seat(0, 0, 2, &a), seat(1, 2, 2, &b)}, 4);
  CHECK(p.source != RestoreSource::kMemory);
  CHECK_THAT(p.why, Contains("the world size changed from 6 to 4"));
  CHECK_THAT(p.why, Contains("resharding is the framework's"));
  // With every old rank's files known (the third agent wrote 4-5's step 35 before it left, and
  // stays as a joiner here), storage's step is the newest all six old ranks have.
  const RestorePoint q = restore({seat(0, 0, 2, &a), seat(1, 2, 2, &b), seat(2, 4, 0, &c)}, 4);
  CHECK(q.source == RestoreSource::kStorage);
  CHECK(q.step == 35);
}

TEST_CASE("restore: a spare's ranks come from the copy another agent holds", "[unit][snapshots]") {
  // Node 1 was lost; node 0's agent held copies of its ranks 2-3 (it is next in the ring of two).
  const HeldSnapshots a =
      with_copies(held(4, {range(0, 1, {35, 40}, {30})}), {range(2, 3, {35, 40})}, 41000);
  const RestoreChoice choice = choose_restore({seat(0, 0, 2, &a), seat(1, 2, 2, nullptr)}, 4);
  CHECK(choice.point.source == RestoreSource::kMemory);
  CHECK(choice.point.step == 40);
  CHECK_THAT(choice.point.why, Contains("2 of them as a copy on another node"));
  REQUIRE(choice.fetch.size() == 2);
  CHECK(choice.fetch[0].empty());  // node 0 holds its own
  REQUIRE(choice.fetch[1].size() == 1);
  const RestoreFetch& f = choice.fetch[1][0];
  CHECK(f.first_rank == 2);
  CHECK(f.last_rank == 3);
  CHECK(f.from.host == "host-0");
  CHECK(f.from.addr == "10.0.0.0");
  CHECK(f.from.port == 41000);
}

TEST_CASE("restore: copies fill only what the seat's own agent lacks, from one step",
          "[unit][snapshots]") {
  // Three nodes in a ring 0 -> 1 -> 2 -> 0: node 2 holds node 1's copies, node 0 node 2's.
  // Node 1's agent is new; its rank 3 copy reached node 2 at 35 only, rank 2's at 40.
  const HeldSnapshots a = with_copies(held(6, {range(0, 1, {35, 40})}), {range(4, 5, {35, 40})}, 1);
  const HeldSnapshots c =
      with_copies(held(6, {range(4, 5, {35, 40})}), {range(2, 2, {35, 40}), range(3, 3, {35})}, 2);
  const RestoreChoice choice =
      choose_restore({seat(0, 0, 2, &a), seat(1, 2, 2, nullptr), seat(2, 4, 2, &c)}, 6);
  CHECK(choice.point.step == 35);
  CHECK(choice.fetch[0].empty());
  CHECK(choice.fetch[2].empty());        // its own memory first, though node 0 holds a copy too
  REQUIRE(choice.fetch[1].size() == 1);  // both ranks from node 2, in one piece
  CHECK(choice.fetch[1][0].first_rank == 2);
  CHECK(choice.fetch[1][0].last_rank == 3);
  CHECK(choice.fetch[1][0].from.port == 2);
}

TEST_CASE("restore: copies without a port, or of another world, do not count",
          "[unit][snapshots]") {
  const HeldSnapshots no_port =
      with_copies(held(4, {range(0, 1, {40}, {40})}), {range(2, 3, {40})}, 0);
  CHECK(restore({seat(0, 0, 2, &no_port), seat(1, 2, 2, nullptr)}, 4).source ==
        RestoreSource::kNone);
  // The world was 6 when node 0 took the copies; it is 4 now.
  const HeldSnapshots old_world =
      with_copies(held(6, {range(0, 1, {40}, {40})}), {range(2, 3, {40})}, 9);
  const RestorePoint p = restore({seat(0, 0, 2, &old_world), seat(1, 2, 2, nullptr)}, 4);
  CHECK(p.source != RestoreSource::kMemory);
  CHECK_THAT(p.why, Contains("the world size changed from 6 to 4"));
}

TEST_CASE("restore: a large world in ranges, checked without a walk over every rank",
          "[unit][snapshots]") {
  std::vector<HeldSnapshots> nodes;
  nodes.reserve(1000);
  for (int n = 0; n < 1000; ++n)
    nodes.push_back(held(16000, {range(n * 16, n * 16 + 15, {95, 100})}));
  std::vector<SeatHolding> seats;
  for (int n = 0; n < 1000; ++n) seats.push_back(seat(n, n * 16, 16, &nodes[n]));
  CHECK(restore(seats, 16000).step == 100);
  nodes[517].ranges[0].memory = {95};
  CHECK(restore(seats, 16000).step == 95);
}

TEST_CASE("restore: joins and assignments carry snapshots and the restore point",
          "[unit][snapshots]") {
  Join join;
  join.node.host = "a";
  join.node.addr = "10.0.0.1";
  join.node.nproc = 2;
  join.node.devices = {0, 1};
  join.node.worker_port = 29400;
  join.snapshots = with_copies(held(4, {range(0, 0, {35, 40}, {30}), range(1, 1, {35})}),
                               {range(2, 3, {35})}, 41000);
  const auto decoded = decode_client_message(encode(ClientMessage{join}));
  const auto* back = std::get_if<ClientMessage>(&decoded);
  if (back == nullptr) FAIL(std::get<ProtocolError>(decoded).message);
  const Join& j = std::get<Join>(*back);
  REQUIRE(j.snapshots.has_value());
  CHECK(j.snapshots->world_size == 4);
  REQUIRE(j.snapshots->ranges.size() == 2);
  CHECK(j.snapshots->ranges[0].memory == std::vector<int64_t>{35, 40});
  CHECK(j.snapshots->ranges[0].stored == std::vector<int64_t>{30});
  CHECK(j.snapshots->ranges[1].last_rank == 1);
  REQUIRE(j.snapshots->copies.size() == 1);
  CHECK(j.snapshots->copies[0].first_rank == 2);
  CHECK(j.snapshots->copies[0].memory == std::vector<int64_t>{35});
  CHECK(j.snapshots->copy_port == 41000);

  Assigned assigned;
  assigned.master_addr = "10.0.0.1";
  assigned.master_port = 29500;
  assigned.restore = RestorePoint{RestoreSource::kMemory, 35, "every rank holds step 35"};
  assigned.restore.fetch = {RestoreFetch{2, 3, CopyPeer{"b", "10.0.0.2", 41001}}};
  assigned.copy_to = CopyPeer{"c", "10.0.0.3", 41002};
  const auto answer = decode_server_message(encode(ServerMessage{assigned}));
  const auto* message = std::get_if<ServerMessage>(&answer);
  REQUIRE(message != nullptr);
  const Assigned& a = std::get<Assigned>(*message);
  CHECK(a.restore.source == RestoreSource::kMemory);
  CHECK(a.restore.step == 35);
  CHECK(a.restore.why == "every rank holds step 35");
  REQUIRE(a.restore.fetch.size() == 1);
  CHECK(a.restore.fetch[0].last_rank == 3);
  CHECK(a.restore.fetch[0].from.addr == "10.0.0.2");
  CHECK(a.restore.fetch[0].from.port == 41001);
  CHECK(a.copy_to.host == "c");
  CHECK(a.copy_to.port == 41002);
}

TEST_CASE("restore: a join's snapshots out of range are refused", "[unit][snapshots]") {
  const std::string bad =
      R"({"type":"join","node":{"host":"a","addr":"1.2.3.4","nproc":2,"devices":[0,1],)"
      R"("worker_port":1},"min_nodes":1,"max_nodes":1,"max_restarts":0,"want_peers":false,)"
      R"("command":"x","snapshots":{"world_size":4,"ranges":[{"first":3,"last":9,)"
      R"("memory":[1],"stored":[]}]}})";
  const auto decoded = decode_client_message(bad);
  const auto* error = std::get_if<ProtocolError>(&decoded);
  REQUIRE(error != nullptr);
  CHECK_THAT(error->message, Contains("'last'"));
}

TEST_CASE("restore: the state machine puts the chosen step in every node's assignment",
          "[unit][snapshots]") {
  JobSettings settings;
  settings.run_id = "job";
  settings.min_nodes = settings.max_nodes = 2;
  const Now t0{Clock::time_point{} + std::chrono::hours(1), 1'700'000'000'000};
  RendezvousState state(settings, t0);
  const HeldSnapshots a = with_copies(held(4, {range(0, 1, {35, 40})}), {}, 41001);
  const HeldSnapshots b = with_copies(held(4, {range(2, 3, {35})}), {}, 41002);
  std::vector<Outgoing> out;
  for (ClientId id : {1, 2}) {
    state.on_message(id, Hello{kMagic, kProtocolVersion, "job", ""}, t0);
    Join j;
    j.node.host = "host-" + std::to_string(id);
    j.node.addr = "10.0.0." + std::to_string(id);
    j.node.nproc = 2;
    j.node.devices = {0, 1};
    j.node_rank = static_cast<int>(id) - 1;
    j.min_nodes = j.max_nodes = 2;
    j.snapshots = id == 1 ? a : b;
    out = state.on_message(id, j, t0);
  }
  int assigned = 0;
  for (const Outgoing& o : out) {
    const auto* m = std::get_if<Assigned>(&o.message);
    if (m == nullptr) continue;
    ++assigned;
    CHECK(m->restore.source == RestoreSource::kMemory);
    CHECK(m->restore.step == 35);
    CHECK(m->restore.fetch.empty());
    // The ring of two: each node copies to the other's agent.
    CHECK(m->copy_to.port == (m->node_rank == 0 ? 41002 : 41001));
    CHECK(m->copy_to.addr == (m->node_rank == 0 ? "10.0.0.2" : "10.0.0.1"));
  }
  CHECK(assigned == 2);
}

}  // namespace test_restore_choice
