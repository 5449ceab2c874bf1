// The node's snapshots as bookkeeping (agent/snapshots/snapshot_shelf.hpp): two per rank at most,
// the budget, saves that die in the middle, restores that drop a future, files kept on storage; and
// --checkpoint-memory's values.
#include <catch2/catch.hpp>

#include "agent/snapshots/snapshot_shelf.hpp"
#include "basics/usage_error.hpp"
#include "cli/value_parsers.hpp"

namespace test_snapshot_shelf {

using namespace npu_run;
using Catch::Matchers::Contains;

namespace {

// A complete save of rank's step, of `bytes`.
void save(SnapshotShelf& shelf, int rank, int64_t step, uint64_t bytes = 100) {
  const SnapshotShelf::Begun begun = shelf.begin(rank, step, bytes);
  REQUIRE(begun.segment != nullptr);
  const uint64_t id = begun.segment->id;
  REQUIRE(shelf.commit(id, bytes, "/ckpt/r" + std::to_string(rank)).segment != nullptr);
}

std::vector<int64_t> memory_of(const SnapshotShelf& shelf, int rank) {
  std::vector<int64_t> steps;
  for (const Segment& s : shelf.segments()) {
    if (s.rank == rank && s.complete) steps.push_back(s.step);
  }
  std::sort(steps.begin(), steps.end());
  return steps;
}

}  // namespace

TEST_CASE("shelf: two complete snapshots per rank, the oldest dropped by a new save",
          "[unit][snapshots]") {
  SnapshotShelf shelf(2, 10'000, 0);
  save(shelf, 0, 5);
  save(shelf, 0, 10);
  CHECK(memory_of(shelf, 0) == std::vector<int64_t>{5, 10});
  const SnapshotShelf::Begun begun = shelf.begin(0, 15, 100);
  REQUIRE(begun.segment != nullptr);
  CHECK(begun.dropped == std::vector<std::string>{"rank0_step5_1"});
  // While 15 is written: 10 complete, 15 not.
  CHECK(memory_of(shelf, 0) == std::vector<int64_t>{10});
  CHECK(shelf.used() == 200);
  CHECK(begun.recycled.empty());  // step 5 was never written to storage: not reused
  // A second save of the rank while one is written is refused.
  CHECK_THAT(shelf.begin(0, 20, 100).refusal, Contains("rank 0 is still saving step 15"));
}

TEST_CASE("shelf: a new save reuses a dropped segment once it is on storage, never before",
          "[unit][snapshots]") {
  SnapshotShelf shelf(1, 10'000, 0);
  save(shelf, 0, 5);
  save(shelf, 0, 10);
  shelf.persisted(0, 5, "/ckpt/r0");
  const SnapshotShelf::Begun begun = shelf.begin(0, 15, 100);
  REQUIRE(begun.segment != nullptr);
  CHECK(begun.recycled == "rank0_step5_1");
  CHECK(begun.dropped.empty());
}

TEST_CASE("shelf: a save that dies in the middle leaves the rank's last complete one",
          "[unit][snapshots]") {
  SnapshotShelf shelf(2, 10'000, 0);
  save(shelf, 1, 35);
  const SnapshotShelf::Begun begun = shelf.begin(1, 40, 100);
  REQUIRE(begun.segment != nullptr);
  const std::string file = begun.segment->name;
  CHECK(shelf.abandon(begun.segment->id) == file);
  CHECK(memory_of(shelf, 1) == std::vector<int64_t>{35});
  CHECK(shelf.used() == 100);
  // The workers gone: what they were writing is dropped.
  REQUIRE(shelf.begin(0, 40, 100).segment != nullptr);
  CHECK(shelf.abandon_writing().size() == 1);
  CHECK(shelf.used() == 100);
}

TEST_CASE("shelf: the budget refuses what does not fit, and drops nothing for it",
          "[unit][snapshots]") {
  SnapshotShelf shelf(2, 1'000, 0);
  save(shelf, 0, 5, 400);
  save(shelf, 1, 5, 400);
  const SnapshotShelf::Begun refused = shelf.begin(0, 10, 300);
  CHECK(refused.segment == nullptr);
  CHECK_THAT(refused.refusal, Contains("local rank 0 at step 10 needs about 300 bytes"));
  CHECK_THAT(refused.refusal, Contains("200 bytes free of 1.0 kB (--checkpoint-memory)"));
  CHECK(refused.dropped.empty());
  // A third save of a rank frees its oldest first: it fits where a second would not.
  save(shelf, 0, 10, 150);
  save(shelf, 0, 15, 400);  // drops step 5's 400
  CHECK(memory_of(shelf, 0) == std::vector<int64_t>{10, 15});
  // A snapshot bigger than its estimate past the budget is refused at commit, and gone.
  const SnapshotShelf::Begun begun = shelf.begin(1, 10, 10);
  REQUIRE(begun.segment != nullptr);
  const SnapshotShelf::Begun grown = shelf.commit(begun.segment->id, 900, "/ckpt/x");
  CHECK(grown.segment == nullptr);
  CHECK_THAT(grown.refusal, Contains("came to 900 bytes"));
  CHECK(grown.dropped.size() == 1);
  CHECK(SnapshotShelf(1, 0, 0).begin(0, 1, 1).refusal ==
        "snapshots in memory are off on this node (--checkpoint-memory 0)");
  CHECK_THAT(shelf.begin(2, 1, 1).refusal, Contains("local rank 2 is not one of this node's 2"));
}

TEST_CASE("shelf: a restore drops the steps after it, and what a join says", "[unit][snapshots]") {
  SnapshotShelf shelf(4, 100'000, 0);
  for (int rank = 0; rank < 4; ++rank) {
    save(shelf, rank, 35);
    if (rank != 3) save(shelf, rank, 40);
  }
  const auto held = shelf.held(8, 16);
  REQUIRE(held.has_value());
  CHECK(held->world_size == 16);
  REQUIRE(held->ranges.size() == 2);  // ranks 8-10 alike, rank 11 apart
  CHECK(held->ranges[0].first_rank == 8);
  CHECK(held->ranges[0].last_rank == 10);
  CHECK(held->ranges[0].memory == std::vector<int64_t>{35, 40});
  CHECK(held->ranges[1].memory == std::vector<int64_t>{35});
  CHECK(shelf.drop_after(35).size() == 3);
  CHECK(shelf.held(8, 16)->ranges.size() == 1);
  CHECK(shelf.drop_after(-1).size() == 4);
  CHECK_FALSE(shelf.held(8, 16).has_value());
}

TEST_CASE("shelf: files on storage beyond --checkpoint-keep are deleted, a rewritten one is not",
          "[unit][snapshots]") {
  SnapshotShelf shelf(1, 100'000, 2);
  CHECK(shelf.persisted(0, 5, "/c/s5").empty());
  CHECK(shelf.persisted(0, 10, "/c/s10").empty());
  CHECK(shelf.persisted(0, 15, "/c/s15") == std::vector<std::string>{"/c/s5"});
  CHECK(shelf.persisted(0, 20, "/c/s15").empty());  // the same file again: the newest now
  CHECK(shelf.persisted(0, 25, "/c/s25") == std::vector<std::string>{"/c/s10"});
  SnapshotShelf all(1, 100'000, 0);
  for (int step = 1; step <= 100; ++step)
    CHECK(all.persisted(0, step, "/c/" + std::to_string(step)).empty());
  const auto held = all.held(0, 1);
  REQUIRE(held.has_value());
  CHECK(held->ranges[0].stored.size() == 8);  // the newest few, on the wire
  CHECK(held->ranges[0].stored.back() == 100);
}

TEST_CASE("shelf: --checkpoint-memory's sizes and shares", "[unit][snapshots][cli]") {
  CHECK(parse_memory_budget("4G", "--checkpoint-memory").first == 4ULL << 30);
  CHECK(parse_memory_budget("512m", "--checkpoint-memory").first == 512ULL << 20);
  CHECK(parse_memory_budget("1.5GB", "--checkpoint-memory").first == 1'500'000'000ULL);
  CHECK(parse_memory_budget("0", "--checkpoint-memory") == std::pair<uint64_t, double>{0, 0});
  CHECK(parse_memory_budget("30%", "--checkpoint-memory").second == Approx(0.3));
  CHECK_THROWS_WITH(
      parse_memory_budget("95%", "--checkpoint-memory"),
      Contains("--checkpoint-memory '95%': a share must be above 0% and at most 90%"));
  CHECK_THROWS_WITH(parse_memory_budget("4X", "--checkpoint-memory"),
                    Contains("unknown unit; give a size (4G, 512M, 0 for none)"));
  CHECK_THROWS_AS(parse_memory_budget("-1G", "x"), UsageError);
  CHECK(size_text(1'500'000'000) == "1.5 GB");
  CHECK(size_text(300'000'000) == "300 MB");
}

}  // namespace test_snapshot_shelf
