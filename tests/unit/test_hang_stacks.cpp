// Reading a hang's stack dumps and blaming the odd one out (issue 18): faulthandler's output as
// Python 3.11 prints it, the comparison across ranks, what a node reports and what the job's
// decision changes in its summary.
#include <algorithm>
#include <catch2/catch.hpp>
#include <csignal>
#include <fstream>

#include "agent/hangs/hang_stacks.hpp"
#include "agent/records/failure_summary.hpp"
#include "rendezvous/protocol/protocol.hpp"
#include "rendezvous/state/hang_blame.hpp"
#include "support/temp_dir.hpp"
#include "workers/python_dump.hpp"

namespace test_hang_stacks {

using namespace npu_run;
using Catch::Matchers::Contains;

namespace {

// Real output of `python3 -X faulthandler` on SIGABRT (Python 3.11), two threads.
const char* kDump =
    "epoch 1 loss 0.3\n"
    "Fatal Python error: Aborted\n"
    "\n"
    "Thread 0x00007f63c94c56c0 (most recent call first):\n"
    "  File \"/usr/lib/python3.11/threading.py\", line 327 in wait\n"
    "  File \"/usr/lib/python3.11/threading.py\", line 975 in run\n"
    "\n"
    "Current thread 0x00007f63c9780040 (most recent call first):\n"
    "  File \"/srv/job/loader.py\", line 88 in wait_for_data\n"
    "  File \"/srv/job/train.py\", line 120 in step\n"
    "  File \"/srv/job/train.py\", line 200 in main\n"
    "  File \"/srv/job/train.py\", line 210 in <module>\n"
    "\n"
    "Extension modules: numpy.core._multiarray_umath, torch._C (total: 2)\n";

rdzv::RankStack stack(int rank, std::string top) {
  rdzv::RankStack s;
  s.rank = rank;
  s.local_rank = rank % 4;
  s.pid = 100 + rank;
  s.frames = {std::move(top), "train.py:1 in main"};
  s.last_beat = "step 7";
  s.silence_ms = 4200;
  return s;
}

std::vector<const rdzv::RankStack*> pointers(const std::vector<rdzv::RankStack>& stacks) {
  std::vector<const rdzv::RankStack*> out;
  for (const auto& s : stacks) out.push_back(&s);
  return out;
}

}  // namespace

TEST_CASE("python dump: the signalled thread's top frames, file names without directories",
          "[unit][hangs]") {
  CHECK(python_dump_top_frames(kDump, 3) ==
        std::vector<std::string>{"loader.py:88 in wait_for_data", "train.py:120 in step",
                                 "train.py:200 in main"});
  CHECK(python_dump_top_frames(kDump, 10).size() == 4);  // the Extension modules line ends it
  // The last dump counts: an earlier one (an earlier SIGABRT the worker survived) does not.
  const std::string two = std::string(kDump) +
                          "Fatal Python error: Aborted\n\nCurrent thread 0x1 (most recent call "
                          "first):\n  File \"x.py\", line 5 in later\n";
  CHECK(python_dump_top_frames(two, 3) == std::vector<std::string>{"x.py:5 in later"});
  // A dump of one thread, one whose thread runs no Python, and output without any dump.
  CHECK(python_dump_top_frames("Fatal Python error: Aborted\n\nStack (most recent call first):\n"
                               "  File \"a.py\", line 1 in f\n",
                               3) == std::vector<std::string>{"a.py:1 in f"});
  CHECK(python_dump_top_frames("Fatal Python error: Aborted\n\nCurrent thread 0x2 (most recent "
                               "call first):\n  <no Python frame>\n",
                               3) == std::vector<std::string>{"<no Python frame>"});
  CHECK(python_dump_top_frames("Traceback (most recent call last):\n  File \"a.py\", line 1\n", 3)
            .empty());
  CHECK(python_dump_top_frames("", 3).empty());
  // Cut at its start (only the tail was kept): the last thread header there is.
  const std::string cut = std::string(kDump).substr(std::string(kDump).find("Current thread") - 1);
  CHECK(python_dump_top_frames(cut, 1) ==
        std::vector<std::string>{"loader.py:88 in wait_for_data"});
  // Control characters in a path cannot forge lines of the summary.
  CHECK(python_dump_top_frames("Fatal Python error: Aborted\n\nCurrent thread 0x2 (most recent "
                               "call first):\n  File \"a\x1b[2J.py\", line 1 in f\n",
                               1)
            .front()
            .find('\x1b') == std::string::npos);
}

TEST_CASE("python dump: the tail of a stderr file", "[unit][hangs]") {
  npu_run::testing::TempDir dir;
  const std::string path = dir.file("stderr.log");
  std::ofstream(path) << std::string(100'000, 'x') << kDump;
  const std::string tail = file_tail(path, kStderrTailBytes);
  CHECK(tail.size() == kStderrTailBytes);
  CHECK(python_dump_top_frames(tail, 1) ==
        std::vector<std::string>{"loader.py:88 in wait_for_data"});
  CHECK(file_tail(dir.file("missing"), 10).empty());
}

TEST_CASE("hang blame: the ranks off the majority's top frame are odd, the first is blamed",
          "[unit][hangs]") {
  std::vector<rdzv::RankStack> stacks;
  for (int r : {0, 1, 2, 4, 5, 6, 7}) stacks.push_back(stack(r, "c10d.py:1536 in all_reduce"));
  stacks.push_back(stack(3, "loader.py:88 in wait_for_data"));
  const rdzv::StackComparison c = rdzv::compare_stacks(pointers(stacks));
  CHECK(c.majority_frame == "c10d.py:1536 in all_reduce");
  CHECK(c.majority == 7);
  CHECK(c.compared == 8);
  REQUIRE(c.odd.size() == 1);
  CHECK(c.odd.front()->rank == 3);

  rdzv::FailureReport hang;  // the timer of rank 0, on node 0, ran out first
  hang.host = "node-a";
  hang.node_rank = 0;
  hang.rank = 0;
  hang.local_rank = 0;
  hang.exit_code = 124;
  hang.hang = true;
  hang.time_ms = 1000;
  hang.description = "hung: no progress for 600 s after 'step 7' (beat 8; --hang-timeout 600 s)";
  const rdzv::FailureReport root = rdzv::blame_hang(hang, c, &stacks[0], "node-b", 1);
  CHECK(root.rank == 3);
  CHECK(root.local_rank == 3);
  CHECK(root.pid == 103);
  CHECK(root.host == "node-b");
  CHECK(root.node_rank == 1);
  CHECK(root.exit_code == 124);
  CHECK(root.time_ms == 1000);
  CHECK(root.description ==
        "hung: no progress for 4.2 s after 'step 7'; stuck in loader.py:88 in wait_for_data <- "
        "train.py:1 in main (the odd one out: 7 of 8 ranks were in c10d.py:1536 in all_reduce)");
}

TEST_CASE("hang blame: without a strict majority nobody is odd and the hung rank keeps the blame",
          "[unit][hangs]") {
  std::vector<rdzv::RankStack> stacks{stack(0, "a.py:1 in f"), stack(1, "b.py:2 in g")};
  rdzv::StackComparison c = rdzv::compare_stacks(pointers(stacks));
  CHECK(c.odd.empty());
  CHECK(c.majority_frame.empty());
  rdzv::FailureReport hang;
  hang.rank = 1;
  hang.hang = true;
  hang.description = "hung: no progress for 2 s after 'step 4'";
  CHECK(rdzv::blame_hang(hang, c, &stacks[1], "h", 0).description ==
        "hung: no progress for 2 s after 'step 4'; stuck in b.py:2 in g <- train.py:1 in main");
  // Every rank in one place: said so.
  stacks[1].frames.front() = "a.py:1 in f";
  c = rdzv::compare_stacks(pointers(stacks));
  CHECK(c.odd.empty());
  CHECK_THAT(rdzv::blame_hang(hang, c, &stacks[1], "h", 0).description,
             Contains("(as were all 2 ranks)"));
  // No stack of the hung rank (a worker gone before the dump): the description stays.
  CHECK(rdzv::blame_hang(hang, c, nullptr, "h", 0).description == hang.description);
}

TEST_CASE("hang blame: the odd ranks are listed in rank order and capped", "[unit][hangs]") {
  std::vector<rdzv::RankStack> stacks;
  const int n = 2 * static_cast<int>(rdzv::Limits::kMaxOddRanks) + 10;
  for (int r = n; r > 0; --r)
    stacks.push_back(stack(r, r % 2 == 0 ? "odd.py:1 in x" : "c.py:1 in y"));
  for (int r = n + 1; r < 2 * n; ++r) stacks.push_back(stack(r, "c.py:1 in y"));
  const rdzv::StackComparison c = rdzv::compare_stacks(pointers(stacks));
  REQUIRE(c.odd.size() == rdzv::Limits::kMaxOddRanks);
  CHECK(c.odd.front()->rank == 2);
  CHECK(std::is_sorted(c.odd.begin(), c.odd.end(),
                       [](const auto* a, const auto* b) { return a->rank < b->rank; }));
}

TEST_CASE("hang stacks: a node reports its ranks' stacks within a report's size", "[unit][hangs]") {
  GroupResult result;
  for (int i = 0; i < 4; ++i) {
    WorkerOutcome w;
    w.local_rank = i;
    w.global_rank = 8 + i;
    w.pid = 500 + i;
    if (i != 2) w.stack_frames = {"a.py:1 in f", "b.py:2 in g", "c.py:3 in h"};  // 2 had none
    result.workers.push_back(w);
  }
  const std::vector<rdzv::RankBeat> beats{
      {0, 4, "step 3", 1500}, {1, 0, "", -1}, {2, 4, "step 3", 10}, {3, 3, "step 2", 9000}};
  const auto stacks = rank_stacks(result, beats);
  REQUIRE(stacks.size() == 3);
  CHECK(stacks[0].rank == 8);
  CHECK(stacks[0].frames.size() == 3);
  CHECK(stacks[0].last_beat == "step 3");
  CHECK(stacks[0].silence_ms == 1500);
  CHECK(stacks[1].silence_ms == -1);
  CHECK(stacks[2].rank == 11);

  // 4,096 ranks of long frames: the top frame only, and as many as fit.
  GroupResult big;
  for (int i = 0; i < rdzv::Limits::kMaxWorkersPerNode; ++i) {
    WorkerOutcome w;
    w.local_rank = i;
    w.global_rank = i;
    w.stack_frames = {std::string(300, 'f'), std::string(300, 'g')};
    big.workers.push_back(w);
  }
  const auto cut = rank_stacks(
      big, std::vector<rdzv::RankBeat>(4096, rdzv::RankBeat{0, 1, std::string(200, 'b'), 1}));
  REQUIRE_FALSE(cut.empty());
  CHECK(cut.size() < 4096);
  CHECK(cut.front().frames.size() == 1);
  CHECK(cut.front().frames.front().size() == rdzv::Limits::kMaxFrameText);
  rdzv::Report report{3, rdzv::Outcome::kFailed, rdzv::FailureReport{}, 0};
  report.failure->description = std::string(rdzv::Limits::kMaxText, 'd');
  report.stacks = cut;
  CHECK(rdzv::encode(rdzv::ClientMessage{report}).size() < rdzv::Limits::kMaxClientFrame);
}

TEST_CASE("hang stacks: the job's decision marks the odd ones and moves the root cause",
          "[unit][hangs]") {
  auto group = [] {
    GroupResult r;
    r.outcome = GroupResult::Outcome::kFailed;
    for (int i = 0; i < 2; ++i) {
      WorkerOutcome w;
      w.local_rank = i;
      w.global_rank = 2 + i;
      w.pid = 700 + i;
      w.status = ExitStatus::signaled(SIGABRT);
      w.stack_frames = {i == 1 ? "loader.py:88 in wait" : "c10d.py:1 in all_reduce"};
      r.workers.push_back(w);
    }
    r.root_cause = 0;  // rank 2's timer ran out first
    r.workers[0].hang = "no progress for 2 s after 'step 4'";
    return r;
  };
  rdzv::Decision d;
  d.exit_code = 124;
  d.odd_ranks = {3};
  d.root_cause = rdzv::FailureReport{};
  d.root_cause->hang = true;
  d.root_cause->host = "node-b";
  d.root_cause->node_rank = 1;
  d.root_cause->rank = 3;
  d.root_cause->description = "hung: no progress for 2.3 s after 'step 4'; stuck in loader.py:88";

  GroupResult here = group();
  CHECK(apply_hang_decision(here, d, 1, "node-b"));
  REQUIRE(here.root_cause == 1);
  CHECK(here.workers[1].odd_one_out);
  CHECK_FALSE(here.workers[0].odd_one_out);
  CHECK(here.workers[0].hang.empty());
  CHECK(here.workers[1].hang == "no progress for 2.3 s after 'step 4'; stuck in loader.py:88");
  const std::string table = format_failure_summary(here, SummaryContext{"node-b", 1, 0, ""}, {});
  CHECK_THAT(table, Contains("hung: no progress for 2.3 s after 'step 4'; stuck in loader.py:88"));
  CHECK_THAT(table, Contains("stack: loader.py:88 in wait   <- the odd one out"));
  CHECK_THAT(table, Contains("stack: c10d.py:1 in all_reduce\n"));
  CHECK(table.find("*  ") < table.find("loader.py:88 in wait"));

  // The blamed rank is on another node: none here is the root cause.
  GroupResult elsewhere = group();
  CHECK_FALSE(apply_hang_decision(elsewhere, d, 0, "node-a"));
  CHECK_FALSE(elsewhere.root_cause);
  CHECK(elsewhere.workers[0].hang.empty());
}

}  // namespace test_hang_stacks
