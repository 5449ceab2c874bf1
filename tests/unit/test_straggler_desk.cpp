// The straggler watch at the rendezvous (rendezvous/state/straggler_desk.hpp,
// state_stragglers.cpp): samples of two nodes' ranks meet per collective; a node whose ranks enter
// last is named after three windows, with its host, its ranks and what it cost; healthy jitter
// never; a node cannot speak for another's ranks; --straggler replace hands the seat to a ready
// spare. And the sample's wire form, bounded.
#include <catch2/catch.hpp>
#include <random>

#include "rendezvous/protocol/protocol.hpp"
#include "rendezvous/protocol/straggler_wire.hpp"
#include "rendezvous/state/state.hpp"
#include "rendezvous/state/straggler_desk.hpp"
#include "support/rdzv_job.hpp"

namespace test_straggler_desk {

using namespace npu_run::rdzv;
using namespace npu_run::testing::rdzv_job;
using Catch::Matchers::Contains;
using npu_run::testing::message_to;
using namespace std::chrono_literals;

namespace {

// Node `node`'s ranks [first, first + n): `per_window` all_reduces 100 ms apart from `start_ms`
// (sequence numbers from `seq`), each rank entering `late_ms` late plus up to `jitter_ms`.
CollectiveSample node_sample(int first, int n, int64_t start_ms, int64_t seq, int per_window,
                             int64_t late_ms, int64_t jitter_ms, std::mt19937& rng) {
  std::uniform_int_distribution<int64_t> noise(0, jitter_ms);
  CollectiveSample s{0, {}};
  for (int r = first; r < first + n; ++r) {
    RankSample& rank = s.ranks.emplace_back();
    rank.rank = r;
    for (int c = 0; c < per_window; ++c)
      rank.calls.push_back({"0", seq + c, start_ms + int64_t{100} * c + late_ms + noise(rng)});
  }
  return s;
}

struct TwoNodes {
  StragglerDesk desk;
  std::mt19937 rng{3};
  int64_t t = 1'000'000;
  int64_t seq = 1;
  TwoNodes() { desk.begin(0, {0, 2}, {"host-a", "host-b"}, 4, 1000, t); }
  // One window of 10 collectives: node 1's ranks `late_ms` late.
  std::optional<NamedStraggler> window(int64_t late_ms, int64_t jitter_ms = 3) {
    desk.add(0, node_sample(0, 2, t, seq, 10, 0, jitter_ms, rng));
    desk.add(1, node_sample(2, 2, t, seq, 10, late_ms, jitter_ms, rng));
    t += 1000;
    seq += 10;
    return desk.score_if_due(t);
  }
};

}  // namespace

TEST_CASE("straggler desk: a node whose ranks enter last is named after three windows",
          "[straggler]") {
  TwoNodes job;
  CHECK_FALSE(job.window(50));
  CHECK_FALSE(job.window(50));
  const auto named = job.window(50);
  REQUIRE(named);
  CHECK(named->node_rank == 1);
  CHECK((named->rank == 2 || named->rank == 3));
  CHECK(named->score.windows == 3);
  CHECK(named->score.share == Approx(0.5).margin(0.08));
  CHECK_THAT(named->text, Contains("node 1 (host-b, ranks 2-3) entered collectives last, keeping "
                                   "its peers waiting") &&
                              Contains("over the last 3 windows"));
  CHECK(job.desk.current());
  CHECK_THAT(announcement(*named, npu_run::StragglerMode::kWarn),
             Contains("straggler: node 1") && Contains("--straggler replace would hand"));
  // Named once; a window on time clears it.
  CHECK_FALSE(job.window(50));
  CHECK_FALSE(job.window(0));
  CHECK_FALSE(job.desk.current());
}

TEST_CASE("straggler desk: healthy jitter, a late node in two windows only, nothing named",
          "[straggler]") {
  TwoNodes job;
  for (int w = 0; w < 30; ++w) CHECK_FALSE(job.window(0, 20));
  CHECK_FALSE(job.window(50));
  CHECK_FALSE(job.window(50));
  CHECK_FALSE(job.window(0));
  CHECK_FALSE(job.window(50));
  CHECK_FALSE(job.desk.current());
}

TEST_CASE("straggler desk: a node's sample names only its own ranks, and of its round",
          "[straggler]") {
  TwoNodes job;
  std::mt19937 rng(4);
  for (int w = 0; w < 4; ++w) {
    // Node 0 claims node 1's ranks entered late, and on time for itself; node 1 says nothing.
    CollectiveSample lie = node_sample(0, 4, job.t, job.seq, 10, 0, 0, rng);
    for (RankSample& r : lie.ranks) {
      if (r.rank >= 2)
        for (EnteredCall& c : r.calls) c.entered_ms += 80;
    }
    job.desk.add(0, lie);
    CollectiveSample old = node_sample(2, 2, job.t, job.seq, 10, 80, 0, rng);
    old.round = 7;
    job.desk.add(1, old);
    job.t += 1000;
    job.seq += 10;
    CHECK_FALSE(job.desk.score_if_due(job.t));
  }
}

TEST_CASE("straggler desk: repeated calls complete nothing, and the open entries stay bounded",
          "[straggler]") {
  TwoNodes job;
  std::mt19937 rng(7);
  // Node 0 sends its ranks' calls three times over; node 1 none: nothing is complete.
  for (int again = 0; again < 3; ++again)
    job.desk.add(0, node_sample(0, 2, job.t, 1, 10, 0, 0, rng));
  CHECK(job.desk.open_entries() == 10);
  CHECK_FALSE(job.desk.score_if_due(job.t + 1000));
  // A flood of invented sequence numbers keeps at most kMaxOpen collectives.
  for (int64_t seq = 0; seq < 30'000; seq += 1000)
    job.desk.add(1, node_sample(2, 2, job.t, seq, 1000, 0, 0, rng));
  CHECK(job.desk.open_entries() <= StragglerDesk::kMaxOpen);
  // The next round starts afresh, and names as the first did.
  job.desk.begin(1, {0, 2}, {"host-a", "host-b"}, 4, 1000, job.t);
  CHECK(job.desk.open_entries() == 0);
  std::optional<NamedStraggler> named;
  for (int w = 0; w < 3; ++w) {
    CollectiveSample a = node_sample(0, 2, job.t, 100 + 10 * w, 10, 0, 2, rng);
    CollectiveSample b = node_sample(2, 2, job.t, 100 + 10 * w, 10, 50, 2, rng);
    a.round = b.round = 1;
    job.desk.add(0, a);
    job.desk.add(1, b);
    job.t += 1000;
    named = job.desk.score_if_due(job.t);
  }
  REQUIRE(named);
  CHECK(named->node_rank == 1);
}

TEST_CASE("straggler desk: in a job of one node, the rank is the unit", "[straggler]") {
  StragglerDesk desk;
  std::mt19937 rng(5);
  int64_t t = 5'000'000;
  desk.begin(0, {0}, {"solo"}, 4, 1000, t);
  std::optional<NamedStraggler> named;
  for (int w = 0; w < 3; ++w) {
    CollectiveSample s = node_sample(0, 4, t, 1 + 10 * w, 10, 0, 2, rng);
    for (EnteredCall& c : s.ranks[3].calls) c.entered_ms += 60;
    desk.add(0, s);
    t += 1000;
    named = desk.score_if_due(t);
  }
  REQUIRE(named);
  CHECK(named->node_rank == -1);
  CHECK(named->rank == 3);
  CHECK_THAT(named->text, Contains("rank 3 entered collectives last"));
}

TEST_CASE("straggler wire: a sample round-trips, and an oversized or malformed one is refused",
          "[straggler]") {
  CollectiveSample s{4, {{2, {{"0", 17, 1'795'881'688'536}, {"1", 3, 1'795'881'688'600}}}}};
  const auto decoded = decode_client_message(encode(ClientMessage{s}));
  REQUIRE(std::holds_alternative<ClientMessage>(decoded));
  const auto back = std::get<CollectiveSample>(std::get<ClientMessage>(decoded));
  CHECK(back.round == 4);
  REQUIRE(back.ranks.size() == 1);
  CHECK(back.ranks[0].rank == 2);
  REQUIRE(back.ranks[0].calls.size() == 2);
  CHECK(back.ranks[0].calls[1].group == "1");
  CHECK(back.ranks[0].calls[1].entered_ms == 1'795'881'688'600);
  json bad = sample_json(s);
  bad["ranks"][0]["calls"][0] = json::array({"0", "x", 1});
  const auto refused = decode_client_message(bad.dump());
  REQUIRE(std::holds_alternative<ProtocolError>(refused));
  CHECK_THAT(std::get<ProtocolError>(refused).message, Contains("[group, seq, entered_ms]"));
  CollectiveSample big{1, {}};
  for (int r = 0; r < 3; ++r)
    big.ranks.push_back({r, std::vector<EnteredCall>(StragglerLimits::kMaxSampledCalls / 2)});
  const auto too_big = decode_client_message(sample_json(big).dump());
  REQUIRE(std::holds_alternative<ProtocolError>(too_big));
  CHECK_THAT(std::get<ProtocolError>(too_big).message, Contains("too many calls"));
}

TEST_CASE("straggler wire: a node's sample fits a client frame, each rank keeping its newest",
          "[straggler]") {
  CollectiveSample s{2, {}};
  for (int r = 0; r < 16; ++r) {
    RankSample& rank = s.ranks.emplace_back();
    rank.rank = r;
    for (int64_t c = 0; c < 1000; ++c)
      rank.calls.push_back({"1234567890123456", 1'000'000'000 + c, 1'795'881'688'536 + c});
  }
  fit_sample(s);
  size_t calls = 0;
  for (const RankSample& r : s.ranks) {
    calls += r.calls.size();
    REQUIRE_FALSE(r.calls.empty());
    CHECK(r.calls.back().seq == 1'000'000'999);  // the newest kept
  }
  CHECK(calls <= StragglerLimits::kMaxSampledCalls);
  CHECK(encode(ClientMessage{s}).size() <= StragglerLimits::kMaxSampleBytes);
  // A small one is left as it was.
  CollectiveSample small{2, {{0, {{"0", 1, 2}}}}};
  fit_sample(small);
  CHECK(small.ranks[0].calls.size() == 1);
}

TEST_CASE("straggler state: replace stops the round and hands the straggler's seat to the spare",
          "[straggler][rdzv]") {
  JobSettings s = with_spares(2, 1);
  s.straggler = {npu_run::StragglerMode::kReplace, std::chrono::milliseconds(1000)};
  Job job(std::move(s));
  for (const auto& [id, host] :
       {std::pair{ClientId{1}, "a"}, {ClientId{2}, "b"}, {ClientId{3}, "c"}}) {
    job.greet(id);
    Join j = join_as(node(host, 1), std::nullopt, 2, 0);
    j.spares = 1;
    job.send(id, j);
  }
  REQUIRE(job.state.phase() == RendezvousState::Phase::kRunning);
  std::mt19937 rng(6);
  std::vector<Outgoing> out;
  Now at = t0;
  for (int w = 0; w < 3 && out.empty(); ++w) {
    CollectiveSample a = node_sample(0, 1, at.wall_ms, 1 + 10 * w, 10, 0, 0, rng);
    CollectiveSample b = node_sample(1, 1, at.wall_ms, 1 + 10 * w, 10, 60, 0, rng);
    job.send(1, a, at);
    at = at + 1100ms;
    out = job.send(2, b, at);
  }
  const StopWorkers* stop = message_to<StopWorkers>(out, 1);
  REQUIRE(stop != nullptr);
  CHECK_THAT(stop->root_cause.description, Contains("a straggler: node 1 (b, rank 1)"));
  job.send(1, Report{0, Outcome::kStopped, std::nullopt, 0}, at);
  out = job.send(2, Report{0, Outcome::kStopped, std::nullopt, 0}, at);
  const Dismissed* dismissed = message_to<Dismissed>(out, 2);
  REQUIRE(dismissed != nullptr);
  CHECK_THAT(dismissed->reason, Contains("a spare takes its seat"));
  const Decision* d = message_to<Decision>(out, 1);
  REQUIRE(d != nullptr);
  CHECK(d->action == Action::kRestart);
  CHECK(d->restarts_charged == 0);
}

}  // namespace test_straggler_desk
