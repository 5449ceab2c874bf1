// Stragglers scored from sampled flight records (rendezvous/state/straggler_score.hpp): a rank that
// enters every collective last is named after three windows over 30 %, with what it cost; a
// healthy run's noise, a rank late in only two windows, or a different rank each window, never.
#include <catch2/catch.hpp>
#include <random>

#include "rendezvous/state/straggler_score.hpp"

namespace test_straggler_score {

using namespace npu_run::rdzv;
using Catch::Matchers::Contains;

namespace {

// A window of `steps` steps of `step_ms`, two all_reduces per step on 4 ranks; `late` enters
// each `late_ms` after the others, and every entry has up to `jitter_ms` of noise.
std::vector<RankSample> window(int64_t start_ms, int steps, int64_t step_ms, int late,
                               int64_t late_ms, int64_t jitter_ms, std::mt19937& rng) {
  std::uniform_int_distribution<int64_t> noise(0, jitter_ms);
  std::vector<RankSample> samples(4);
  for (int r = 0; r < 4; ++r) {
    samples[static_cast<size_t>(r)].rank = r;
    for (int s = 0; s < steps; ++s) {
      for (int c = 0; c < 2; ++c) {
        const int64_t at =
            start_ms + s * step_ms + c * step_ms / 2 + noise(rng) + (r == late ? late_ms : 0);
        samples[static_cast<size_t>(r)].calls.push_back(
            {"default_pg", start_ms / step_ms + 2 * int64_t{s} + c, at});
      }
    }
  }
  return samples;
}

}  // namespace

TEST_CASE("stragglers: the rank entering last, and what its peers waited", "[straggler]") {
  std::mt19937 rng(1);
  // Rank 2 enters each of 20 collectives 40 ms late in a 1 s window: 800 ms, 80 %.
  const WindowScore s = score_window(window(0, 10, 100, 2, 40, 0, rng), 1000);
  CHECK(s.rank == 2);
  CHECK(s.cost_ms == 800);
  CHECK(s.share == Approx(0.8));
  CHECK(s.collectives == 20);
  // A collective only one rank was sampled in, and lateness within the tolerance, count nothing.
  std::vector<RankSample> lone{{0, {{"g", 1, 100}}}, {1, {{"g", 2, 100}}}};
  CHECK(score_window(lone, 1000).rank == -1);
  std::vector<RankSample> close{{0, {{"g", 1, 100}}}, {1, {{"g", 1, 102}}}};
  CHECK(score_window(close, 1000).rank == -1);
}

TEST_CASE("stragglers: named after three windows over 30 %, once, and again after a good one",
          "[straggler]") {
  std::mt19937 rng(2);
  StragglerWatch watch;
  int64_t t = 0;
  auto next = [&](int late, int64_t late_ms) {
    const WindowScore s = score_window(window(t, 10, 100, late, late_ms, 5, rng), 1000);
    t += 1000;
    return watch.add(s);
  };
  CHECK_FALSE(next(3, 50));
  CHECK_FALSE(next(3, 50));
  const auto named = next(3, 50);
  REQUIRE(named);
  CHECK(named->rank == 3);
  CHECK(named->windows == 3);
  CHECK(named->share > 0.8);
  CHECK(named->cost_ms > 2400);
  CHECK_THAT(describe(*named),
             Contains("rank 3 entered collectives last") && Contains("over the last 3 windows"));
  CHECK_FALSE(next(3, 50));  // still late: named once
  CHECK_FALSE(next(-1, 0));  // a good window
  CHECK_FALSE(next(3, 50));
  CHECK_FALSE(next(3, 50));
  CHECK(next(3, 50));
}

TEST_CASE("stragglers: no false alarm on noise, two late windows, or a different rank each time",
          "[straggler]") {
  std::mt19937 rng(3);
  // Ten healthy runs: 100 ms steps with up to 10 ms of noise on every entry.
  for (int run = 0; run < 10; ++run) {
    StragglerWatch watch;
    for (int w = 0; w < 20; ++w) {
      CHECK_FALSE(
          watch.add(score_window(window(int64_t{w} * 1000, 10, 100, -1, 0, 10, rng), 1000)));
    }
  }
  StragglerWatch watch;
  CHECK_FALSE(watch.add(score_window(window(0, 10, 100, 1, 50, 5, rng), 1000)));
  CHECK_FALSE(watch.add(score_window(window(1000, 10, 100, 1, 50, 5, rng), 1000)));
  CHECK_FALSE(watch.add(score_window(window(2000, 10, 100, -1, 0, 5, rng), 1000)));
  CHECK_FALSE(watch.add(score_window(window(3000, 10, 100, 2, 50, 5, rng), 1000)));
  CHECK_FALSE(watch.add(score_window(window(4000, 10, 100, 0, 50, 5, rng), 1000)));
  CHECK_FALSE(watch.add(score_window(window(5000, 10, 100, 2, 50, 5, rng), 1000)));
  // Late, but below 30 % of the window (10 ms of each 100 ms step: 20 %).
  StragglerWatch mild;
  for (int w = 0; w < 5; ++w)
    CHECK_FALSE(mild.add(score_window(window(int64_t{w} * 1000, 10, 100, 1, 10, 0, rng), 1000)));
}

}  // namespace test_straggler_score
