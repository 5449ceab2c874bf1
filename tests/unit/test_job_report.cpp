// `npu_run report`'s figures and page, from synthetic timelines: what each restart cost and the
// goodput, the page's content, and its size for a 1,024-node job; and --metrics-port's text.
#include <catch2/catch.hpp>

#include "agent/link/metrics_text.hpp"
#include "report/html_report.hpp"
#include "report/job_figures.hpp"

namespace test_job_report {

using namespace npu_run;
using Catch::Matchers::Contains;
using rdzv::TimelineEvent;
using rdzv::TimelinePhase;

namespace {

constexpr int64_t kT0 = 1'700'000'000'000;

TimelineEvent event(int node, int rank, uint64_t round, TimelinePhase phase, int64_t at,
                    int64_t step = -1) {
  return TimelineEvent{node, "host-" + std::to_string(node), rank, round, phase, kT0 + at, step,
                       ""};
}

// Nodes x ranks per node; for each round: formed at, first beats at, last beats at, failed at
// (0: none), decided at.
struct RoundPlan {
  int64_t formed, first, last, failed, decided;
};

RunTimeline synthetic(int nodes, int per_node, const std::vector<RoundPlan>& rounds,
                      int samples = 0) {
  RunTimeline run;
  run.run_id = "nightly";
  for (int n = 0; n < nodes; ++n)
    run.events.push_back(event(n, -1, 0, TimelinePhase::kAgentStart, 0));
  for (uint64_t r = 0; r < rounds.size(); ++r) {
    const RoundPlan& p = rounds[r];
    for (int n = 0; n < nodes; ++n) {
      run.events.push_back(event(n, -1, r, TimelinePhase::kJoin, p.formed - 10));
      run.events.push_back(event(n, -1, r, TimelinePhase::kFormed, p.formed));
      run.events.push_back(event(n, -1, r, TimelinePhase::kSpawned, p.formed + 5));
      for (int l = 0; l < per_node; ++l) {
        const int rank = n * per_node + l;
        run.events.push_back(event(n, rank, r, TimelinePhase::kFirstBeat, p.first));
        for (int s = 1; s <= samples; ++s) {
          const int64_t at = p.first + (p.last - p.first) * s / (samples + 1);
          run.events.push_back(event(n, rank, r, TimelinePhase::kBeat, at, at / 10));
        }
        run.events.push_back(event(n, rank, r, TimelinePhase::kLastBeat, p.last, p.last / 10));
      }
      if (p.failed > 0 && n == 1)
        run.events.push_back(event(n, 3, r, TimelinePhase::kFailed, p.failed));
      run.events.push_back(event(n, -1, r, TimelinePhase::kExited, p.decided - 100));
    }
    const bool last = r + 1 == rounds.size();
    run.events.push_back(
        event(-1, -1, r, last ? TimelinePhase::kFinished : TimelinePhase::kRestart, p.decided));
    RoundRecord& record = run.rounds.emplace_back();
    record.round = r;
    record.blame = {{"round", r},
                    {"began", kT0},
                    {"formed", kT0 + p.formed},
                    {"world_size", nodes * per_node},
                    {"blame", "round " + std::to_string(r) + " formed"}};
    record.decision = {{"action", last ? "finish" : "restart"},
                       {"exit_code", 0},
                       {"restart_count", r + (last ? 0 : 1)}};
    if (p.failed > 0) {
      record.decision["root_cause"] = {
          {"description", "exit code 3"},
          {"host", "host-1"},
          {"node_rank", 1},
          {"rank", 3},
          {"evidence", {{"exception", "ValueError"}, {"frame", "train.py:88 in step"}}}};
    }
  }
  return run;
}

const std::vector<RoundPlan> kTwoRestarts{{1'000, 2'000, 10'000, 10'500, 11'000},
                                          {12'000, 13'000, 20'000, 20'200, 21'000},
                                          {22'000, 23'000, 30'000, 0, 30'500}};

}  // namespace

TEST_CASE("report figures: two restarts, what each cost, and the goodput", "[report]") {
  const JobFigures f = job_figures(synthetic(2, 2, kTwoRestarts));
  CHECK(f.wall_ms == 30'500);
  CHECK(f.time_to_first_step_ms == 2'000);
  CHECK(f.restarts == 2);
  REQUIRE(f.restart_costs.size() == 2);
  CHECK(f.restart_costs[0].stopped_ms == kT0 + 10'000);  // the first rank's last beat
  CHECK(f.restart_costs[0].lost_ms == 3'000);            // until every rank beat again
  CHECK(f.restart_costs[1].lost_ms == 3'000);
  CHECK(f.restart_costs[0].cause == "exit code 3");
  CHECK(f.beating_ms == 8'000 + 7'000 + 7'000);
  CHECK(f.goodput == Approx(22'000.0 / 30'500.0));
  CHECK(f.exit_code == 0);
  CHECK(f.max_nodes == 2);
  CHECK(f.max_ranks == 4);
}

TEST_CASE("report figures: a rank that never beats means no time with every rank beating",
          "[report]") {
  RunTimeline run = synthetic(2, 2, {{1'000, 2'000, 10'000, 0, 11'000}});
  run.rounds[0].blame["world_size"] = 5;  // one rank more than beat
  const JobFigures f = job_figures(run);
  CHECK(f.time_to_first_step_ms == -1);
  CHECK(f.goodput == 0);
}

TEST_CASE("report page: self-contained, with the nodes, the root cause and the figures",
          "[report]") {
  const std::string page = html_report(synthetic(2, 2, kTwoRestarts));
  CHECK_THAT(page, Contains("<svg"));
  CHECK_THAT(page, Contains("0 host-0"));
  CHECK_THAT(page, Contains("1 host-1"));
  CHECK_THAT(page, Contains("ValueError at train.py:88 in step"));
  CHECK_THAT(page, Contains("72.1 %"));  // goodput
  CHECK_THAT(page, Contains("time to first step"));
  // Nothing to fetch: no script, no link, no image, no remote font.
  for (const char* fetch : {"<script", "src=", "href=", "url(", "@import", "http://", "https://"})
    CHECK(page.find(fetch) == std::string::npos);
}

TEST_CASE("report page: 1,024 nodes x 8 ranks of sampled beats stay under 2 MB", "[report]") {
  const RunTimeline run = synthetic(1024, 8, {{1'000, 2'000, 3'600'000, 0, 3'601'000}}, 32);
  const std::string page = html_report(run);
  CHECK(page.size() < size_t{2} * 1024 * 1024);
  CHECK_THAT(page, Contains("slowest rank"));
}

TEST_CASE("metrics text: one HELP and TYPE per family, label values escaped", "[report]") {
  MetricsText out;
  out.counter("npu_run_rounds_total", "Rounds", 3);
  out.family("npu_run_rank_beats", "gauge", "Beats");
  out.sample("npu_run_rank_beats", 7, {{"rank", "0"}});
  out.family("npu_run_rank_beats", "gauge", "Beats");
  out.sample("npu_run_rank_beats", 2.5, {{"rank", "1"}});
  out.gauge("npu_run_agent_info", "Info", 1, {{"host", "a\"b\\c\nd"}});
  CHECK(out.text() ==
        "# HELP npu_run_rounds_total Rounds\n# TYPE npu_run_rounds_total counter\n"
        "npu_run_rounds_total 3\n# HELP npu_run_rank_beats Beats\n# TYPE npu_run_rank_beats "
        "gauge\nnpu_run_rank_beats{rank=\"0\"} 7\nnpu_run_rank_beats{rank=\"1\"} 2.5\n"
        "# HELP npu_run_agent_info Info\n# TYPE npu_run_agent_info gauge\n"
        "npu_run_agent_info{host=\"a\\\"b\\\\c\\nd\"} 1\n");
}

}  // namespace test_job_report
