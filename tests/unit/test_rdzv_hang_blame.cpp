// The rendezvous state machine, driven directly: a hang notice stops the other nodes at once, and
// the stacks or flight records each node reports name the rank at fault on every node.
#include <catch2/catch.hpp>

#include "rendezvous/state/hang_blame.hpp"
#include "rendezvous/state/state.hpp"
#include "support/rdzv_job.hpp"

namespace test_rdzv_hang_blame {

using namespace npu_run::rdzv;
using namespace npu_run::testing::rdzv_job;
using npu_run::testing::message_to;
using namespace std::chrono_literals;

TEST_CASE("rdzv state: a hang notice stops the other nodes at once, before the hung node reports",
          "[rdzv]") {
  Job job(settings(3));
  job.join(1, node("a"));
  job.join(2, node("b"));
  job.join(3, node("c"));
  FailureReport hang;
  hang.host = "claimed";  // identity comes from the seat
  hang.rank = 5;
  hang.exit_code = npu_run::kExitHang;
  hang.description = "hung: no progress for 600 s after 'step 1200'";
  hang.time_ms = 1'700'000'000'500;
  CHECK(job.send(3, HangNotice{7, hang}).empty());  // another round's: nothing
  const auto out = job.send(3, HangNotice{job.state.round(), hang});
  for (ClientId other : {1, 2}) {
    const StopWorkers* stop = message_to<StopWorkers>(out, other);
    REQUIRE(stop != nullptr);
    CHECK(stop->root_cause.hang);
    CHECK(stop->root_cause.host == "c");
    CHECK(stop->root_cause.rank == 5);
  }
  CHECK(message_to<StopWorkers>(out, 3) == nullptr);
  // Its report later names the same failure; the others' stops follow; one decision.
  Report report{job.state.round(), Outcome::kFailed, hang, 0};
  CHECK(job.send(3, report).empty());
  job.send(1, Report{job.state.round(), Outcome::kStopped, std::nullopt, 0});
  const auto decided = job.send(2, Report{job.state.round(), Outcome::kStopped, std::nullopt, 0});
  const Decision* d = message_to<Decision>(decided, 1);
  REQUIRE(d != nullptr);
  CHECK(d->exit_code == npu_run::kExitHang);
  CHECK(d->root_cause->hang);
  CHECK(d->root_cause->node_rank == 2);
}

TEST_CASE("rdzv state: a hang is blamed on the rank whose stack is the odd one out, on any node",
          "[rdzv][hangs]") {
  Job job(settings(2));
  job.join(1, node("a"));  // ranks 0-1
  job.join(2, node("b"));  // ranks 2-3
  // Node a's timer ran out first (every rank waits in the collective); rank 3 is elsewhere.
  FailureReport hang;
  hang.rank = 0;
  hang.local_rank = 0;
  hang.exit_code = npu_run::kExitHang;
  hang.hang = true;
  hang.description = "hung: no progress for 2 s after 'step 4'";
  hang.time_ms = 1'700'000'000'500;
  job.send(1, HangNotice{job.state.round(), hang});
  auto at = [](int rank, const char* top) {
    return RankStack{rank, 0, 100 + rank, {top}, "step 4", 2000};
  };
  Report a{job.state.round(), Outcome::kFailed, hang, 0};
  a.stacks = {at(0, "c10d.py:1 in all_reduce"), at(1, "c10d.py:1 in all_reduce"),
              at(3, "forged.py:1 in claimed")};  // node b's rank: not node a's to report
  job.send(1, a);
  Report b{job.state.round(), Outcome::kStopped, std::nullopt, 0};
  b.stacks = {at(2, "c10d.py:1 in all_reduce"), at(3, "loader.py:88 in wait")};
  const auto out = job.send(2, b);
  const Decision* d = message_to<Decision>(out, 1);
  REQUIRE(d != nullptr);
  CHECK(d->exit_code == npu_run::kExitHang);
  CHECK(d->odd_ranks == std::vector<int>{3});
  REQUIRE(d->root_cause);
  CHECK(d->root_cause->rank == 3);
  CHECK(d->root_cause->local_rank == 1);  // from the seat's rank offset
  CHECK(d->root_cause->host == "b");
  CHECK(d->root_cause->node_rank == 1);
  CHECK(d->root_cause->hang);
  CHECK(d->root_cause->time_ms == hang.time_ms);
  CHECK(d->root_cause->description ==
        "hung: no progress for 2.0 s after 'step 4'; stuck in loader.py:88 in wait (the odd one "
        "out: 3 of 4 ranks were in c10d.py:1 in all_reduce)" +
            std::string(npu_run::rdzv::kNoRecorderNote));
  CHECK(message_to<Decision>(out, 2)->root_cause->rank == 3);
}

TEST_CASE("rdzv state: with flight records a hang is blamed on the rank that never entered",
          "[rdzv][hangs][flight-recorder]") {
  Job job(settings(2));
  job.join(1, node("a"));  // ranks 0-1
  job.join(2, node("b"));  // ranks 2-3
  FailureReport hang;
  hang.rank = 0;
  hang.exit_code = npu_run::kExitHang;
  hang.hang = true;
  hang.description = "hung: no progress for 2 s after 'step 4'";
  hang.time_ms = 1'700'000'000'500;
  job.send(1, HangNotice{job.state.round(), hang});
  // Every stack is in all_reduce: only the sequence numbers tell rank 2 is behind.
  auto at = [](int rank, int64_t entered) {
    RankStack s{rank, 0, 100 + rank, {"c10d.py:1 in all_reduce"}, "step 4", 2000};
    s.record = RankRecord::kServer;
    s.recorder = true;
    GroupCalls group{"default_pg", entered, 40, {}};
    group.last.push_back(RecordedCall{entered, "all_reduce", "[[8]]", "Float", 5000, false});
    s.groups = {group};
    return s;
  };
  Report a{job.state.round(), Outcome::kFailed, hang, 0};
  a.stacks = {at(0, 41), at(1, 41)};
  job.send(1, a);
  Report b{job.state.round(), Outcome::kStopped, std::nullopt, 0};
  b.stacks = {at(2, 40), at(3, 41)};
  const auto out = job.send(2, b);
  const Decision* d = message_to<Decision>(out, 1);
  REQUIRE(d != nullptr);
  REQUIRE(d->root_cause);
  CHECK(d->root_cause->rank == 2);
  CHECK(d->root_cause->host == "b");
  CHECK(d->root_cause->node_rank == 1);
  CHECK(d->odd_ranks == std::vector<int>{2});
  CHECK(d->root_cause->description ==
        "hung: rank 2 never entered all_reduce #41 of the default group, which ranks 0, 1 and 3 "
        "entered 5.0 s ago; rank 2 is in c10d.py:1 in all_reduce");
}

}  // namespace test_rdzv_hang_blame
