// The rank at fault from the flight recorders (issue 46): torch 2.14's own answers read back
// (tests/data/flight_recorder, taken from gloo with rank 2 stuck in its data loader), the four
// ways the ranks part (a desync, a rank behind, a rank that answered nothing, a collective that
// never completed on one rank), the wire, and the job's decision with and without recorders.
#include <catch2/catch.hpp>
#include <fstream>
#include <sstream>

#include "agent/hangs/recorded_calls.hpp"
#include "rendezvous/protocol/json_fields.hpp"
#include "rendezvous/protocol/protocol.hpp"
#include "rendezvous/protocol/wire_parts.hpp"
#include "rendezvous/state/collective_blame.hpp"
#include "support/build_paths.hpp"
#include "workers/python_dump.hpp"

namespace test_collective_blame {

using namespace npu_run;
using Catch::Matchers::Contains;
using rdzv::GroupCalls;
using rdzv::RankStack;
using rdzv::RecordedCall;

namespace {

std::string fixture(const std::string& name) {
  std::ifstream in(std::string(testing::build_paths::kTestData) + "/flight_recorder/" + name);
  std::stringstream text;
  text << in.rdbuf();
  REQUIRE_FALSE(text.str().empty());
  return text.str();
}

// A rank that recorded `entered` all_reduces of the default group of 4,096 float32 (the last
// `completed` of them completed), the last four kept, each `age_ms` old.
RankStack recorded(int rank, int64_t entered, int64_t completed, const std::string& frame,
                   int64_t age_ms = 61'000) {
  RankStack s;
  s.rank = rank;
  s.local_rank = rank;
  s.pid = 1000 + rank;
  s.frames = {frame};
  s.record = rdzv::RankRecord::kServer;
  s.recorder = true;
  GroupCalls g;
  g.group = "default_pg";
  g.entered = entered;
  g.completed = completed;
  for (int64_t seq = std::max<int64_t>(1, entered - 3); seq <= entered; ++seq)
    g.last.push_back(
        RecordedCall{seq, "all_reduce", "[[4096]]", "Float", age_ms, seq <= completed});
  s.groups = {g};
  return s;
}

std::vector<const RankStack*> pointers(const std::vector<RankStack>& stacks) {
  std::vector<const RankStack*> out;
  for (const RankStack& s : stacks) out.push_back(&s);
  return out;
}

constexpr const char* kInCollective = "distributed_c10d.py:3913 in all_reduce";

}  // namespace

TEST_CASE("flight records: torch 2.14's answer is read into the group's counts and last calls",
          "[unit][flight-recorder]") {
  const int64_t created_ns = 1'795'880'493'000'000'000;  // about the fixture's calls
  const auto waiting = recorded_groups(fixture("torch2.14_rank0_waiting.json"), created_ns);
  REQUIRE(waiting.has_value());
  REQUIRE(waiting->size() == 1);
  const GroupCalls& group = waiting->front();
  CHECK(group.group == "default_pg");
  CHECK(group.entered == 6);
  CHECK(group.completed == 5);
  REQUIRE(group.last.size() == rdzv::Limits::kMaxRecordedCalls);
  CHECK(group.last.back().seq == 6);
  CHECK(group.last.back().op == "all_reduce");
  CHECK(group.last.back().sizes == "[[4096]]");
  CHECK(group.last.back().dtypes == "Float");
  CHECK_FALSE(group.last.back().completed);
  CHECK(group.last.front().completed);
  const auto behind = recorded_groups(fixture("torch2.14_rank2_behind.json"), created_ns);
  REQUIRE(behind.has_value());
  CHECK(behind->front().entered == 5);
  CHECK(behind->front().completed == 5);
}

TEST_CASE("flight records: what is not a recorder's answer reads as none",
          "[unit][flight-recorder]") {
  CHECK_FALSE(recorded_groups("", 0).has_value());
  CHECK_FALSE(recorded_groups("Not Found", 0).has_value());
  CHECK_FALSE(recorded_groups("{\"entries\": []}", 0).has_value());
  CHECK_FALSE(recorded_groups("[1, 2]", 0).has_value());
  // A recorder that saw no collective yet: a recorder all the same, with nothing to compare.
  const auto empty = recorded_groups(
      R"({"pg_status": {"0": {"last_enqueued_collective": "-1",
          "last_completed_collective": "-1"}}, "entries": []})",
      0);
  REQUIRE(empty.has_value());
  CHECK(empty->empty());
}

TEST_CASE("flight records: the worker server's traceback gives the main thread's frames",
          "[unit][flight-recorder]") {
  // The dump is taken from the server's own thread ("Current thread"), listed first.
  const auto frames = python_dump_main_thread_frames(fixture("torch2.14_dump_traceback.txt"), 3);
  REQUIRE(frames.size() == 3);
  CHECK(frames[0] == kInCollective);
  CHECK(frames[2] == "hang2.py:22 in <module>");
  CHECK(python_dump_main_thread_frames("Current thread 0x1 (most recent call first):\n"
                                       "  File \"/a/t.py\", line 3 in f\n",
                                       3) == std::vector<std::string>{"t.py:3 in f"});
  CHECK(python_dump_main_thread_frames("nothing here", 3).empty());
}

TEST_CASE("collective blame: the rank that never entered the collective its peers wait in",
          "[unit][flight-recorder]") {
  const std::vector<RankStack> stacks{
      recorded(0, 412, 411, kInCollective), recorded(1, 412, 411, kInCollective),
      recorded(2, 411, 411, "train.py:88 in load_batch"), recorded(3, 412, 411, kInCollective)};
  const auto blame = rdzv::blame_collectives(pointers(stacks));
  REQUIRE(blame.has_value());
  CHECK(blame->culprit->rank == 2);
  CHECK(blame->description ==
        "rank 2 never entered all_reduce #412 of the default group, which ranks 0, 1 and 3 "
        "entered 61.0 s ago; rank 2 is in train.py:88 in load_batch");
}

TEST_CASE("collective blame: a desync at one sequence number names the rank with other sizes",
          "[unit][flight-recorder]") {
  std::vector<RankStack> stacks{recorded(0, 7, 6, kInCollective), recorded(1, 7, 6, kInCollective),
                                recorded(2, 7, 6, kInCollective), recorded(3, 7, 6, kInCollective)};
  stacks[1].groups[0].last.back().sizes = "[[2048]]";
  const auto blame = rdzv::blame_collectives(pointers(stacks));
  REQUIRE(blame.has_value());
  CHECK(blame->culprit->rank == 1);
  CHECK_THAT(blame->description,
             Contains("rank 1 called all_reduce with 2,048 float32 where ranks 0, 2 and 3 called "
                      "all_reduce with 4,096 float32, as collective #7 of the default group"));
  // Another collective, and another dtype, at the same number are desyncs too.
  stacks[1].groups[0].last.back() = {7, "broadcast", "[[4096]]", "Float", 1000, false};
  CHECK_THAT(rdzv::blame_collectives(pointers(stacks))->description,
             Contains("rank 1 called broadcast with 4,096 float32"));
  stacks[1].groups[0].last.back() = {7, "all_reduce", "[[4096]]", "Double", 1000, false};
  CHECK_THAT(rdzv::blame_collectives(pointers(stacks))->description,
             Contains("rank 1 called all_reduce with 4,096 float64"));
}

TEST_CASE("collective blame: a rank that answered nothing while its peers wait",
          "[unit][flight-recorder]") {
  std::vector<RankStack> stacks{recorded(0, 6, 5, kInCollective), recorded(1, 6, 5, kInCollective),
                                recorded(3, 6, 5, kInCollective)};
  RankStack stopped;
  stopped.rank = 2;
  stopped.frames = {"hang2.py:12 in load_batch"};
  stopped.record = rdzv::RankRecord::kSilent;
  stacks.push_back(stopped);
  const auto blame = rdzv::blame_collectives(pointers(stacks));
  REQUIRE(blame.has_value());
  CHECK(blame->culprit->rank == 2);
  CHECK_THAT(blame->description,
             Contains("rank 2 answered nothing through its worker server (stopped, or stuck "
                      "holding the GIL) and never reached where ranks 0, 1 and 3 wait: "
                      "all_reduce #6 of the default group"));
}

TEST_CASE("collective blame: a collective that completed everywhere but on one rank",
          "[unit][flight-recorder]") {
  const std::vector<RankStack> stacks{
      recorded(0, 412, 412, "train.py:90 in step"), recorded(1, 412, 412, "train.py:90 in step"),
      recorded(2, 412, 412, "train.py:90 in step"), recorded(3, 412, 411, kInCollective)};
  const auto blame = rdzv::blame_collectives(pointers(stacks));
  REQUIRE(blame.has_value());
  CHECK(blame->culprit->rank == 3);
  CHECK_THAT(blame->description,
             Contains("rank 3's all_reduce #412 of the default group never completed, while "
                      "ranks 0-2 completed theirs (its device or link)"));
}

TEST_CASE("collective blame: recorders that agree, or none at all, leave it to the stacks",
          "[unit][flight-recorder]") {
  const std::vector<RankStack> agree{recorded(0, 9, 8, kInCollective),
                                     recorded(1, 9, 8, kInCollective)};
  CHECK_FALSE(rdzv::blame_collectives(pointers(agree)).has_value());
  RankStack old;
  old.rank = 0;
  old.frames = {"train.py:1 in f"};
  CHECK_FALSE(rdzv::blame_collectives({&old}).has_value());
}

TEST_CASE("collective blame: rank lists read as people write them", "[unit][flight-recorder]") {
  CHECK(rdzv::rank_list({3}) == "3");
  CHECK(rdzv::rank_list({0, 1, 3}) == "0, 1 and 3");
  CHECK(rdzv::rank_list({16, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14}) == "0-14 and 16");
}

TEST_CASE("flight records: a rank's records cross the wire and come back whole",
          "[unit][flight-recorder]") {
  const RankStack sent = recorded(5, 412, 411, kInCollective);
  const RankStack got = rdzv::stack_from(rdzv::to_json(sent));
  CHECK(got.record == rdzv::RankRecord::kServer);
  CHECK(got.recorder);
  REQUIRE(got.groups.size() == 1);
  CHECK(got.groups[0].entered == 412);
  CHECK(got.groups[0].last.size() == 4);
  CHECK(got.groups[0].last.back().sizes == "[[4096]]");
  // A stack taken by SIGABRT carries none of it: what older servers read.
  RankStack plain;
  plain.frames = {"a.py:1 in f"};
  CHECK_FALSE(rdzv::to_json(plain).contains("groups"));
  // A peer that sends more than the bounds loses its frame, not the server's memory.
  nlohmann::json big = rdzv::to_json(sent);
  big["groups"] = nlohmann::json::array();
  for (size_t i = 0; i <= rdzv::Limits::kMaxRecordedGroups; ++i)
    big["groups"].push_back(rdzv::to_json(sent)["groups"][0]);
  CHECK_THROWS_AS(rdzv::stack_from(big), rdzv::BadMessage);
}

}  // namespace test_collective_blame
