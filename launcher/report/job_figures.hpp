// The headline figures of a job, from its timeline: when training first ran on every rank, what
// each restart cost, and the goodput, the share of the wall time in which every rank of the
// round was beating (from the last rank's first beat to the first rank's last). Pure.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "report/run_timeline.hpp"

namespace npu_run {

struct RoundSpan {
  uint64_t round = 0;
  int nodes = 0;
  int world_size = 0;          // from the round's blame; else the ranks that beat
  int64_t began_ms = 0;        // the round's start (round 0: the first agent's)
  int64_t formed_ms = 0;       // 0: unknown
  int64_t all_beating_ms = 0;  // the last rank's first beat; 0: never every rank
  int64_t beats_end_ms = 0;    // the first rank's last beat (with all_beating_ms)
  int64_t failed_ms = 0;       // the round's first failure; 0: none
  int64_t decided_ms = 0;      // its decision; 0: none
  std::string action;          // "restart", "finish", "" (no decision recorded)
  bool membership_change = false;
  std::string cause;  // the root cause's description, when it failed
  int64_t beating_ms() const {
    return all_beating_ms > 0 && beats_end_ms > all_beating_ms ? beats_end_ms - all_beating_ms : 0;
  }
};

// What one restart cost: from the moment the failed round stopped making progress (its first
// rank's last beat, else its first failure, else its decision) to every rank beating again.
struct RestartCost {
  uint64_t failed_round = 0;
  int64_t stopped_ms = 0;
  int64_t resumed_ms = 0;  // 0: never resumed (the job ended)
  int64_t lost_ms = 0;
  std::string cause;  // the root cause's description
};

struct JobFigures {
  int64_t start_ms = 0;  // the first event (the first agent's start)
  int64_t end_ms = 0;    // the job's end (its final decision, else its last event)
  int64_t wall_ms = 0;
  int64_t time_to_first_step_ms = -1;  // until every rank first beat; -1: never
  int restarts = 0;                    // restarts after failures
  int reforms = 0;                     // elastic re-forms (no failure)
  std::vector<RestartCost> restart_costs;
  int64_t beating_ms = 0;
  double goodput = 0;  // beating_ms / wall_ms
  int exit_code = -1;  // -1: the job's end is not in the timeline
  int max_nodes = 0;
  int max_ranks = 0;
  std::vector<RoundSpan> rounds;
};

JobFigures job_figures(const RunTimeline& run);

}  // namespace npu_run
