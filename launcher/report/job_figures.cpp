#include "report/job_figures.hpp"

#include <algorithm>
#include <limits>
#include <map>
#include <set>

namespace npu_run {

namespace {

using rdzv::TimelineEvent;
using rdzv::TimelinePhase;

struct RoundBeats {
  std::map<int, int64_t> first;  // rank -> first beat
  std::map<int, int64_t> last;   // rank -> last beat
  std::set<int> nodes;
};

RoundSpan& span_of(std::map<uint64_t, RoundSpan>& spans, uint64_t round) {
  RoundSpan& s = spans[round];
  s.round = round;
  return s;
}

void note_event(const TimelineEvent& e, RoundSpan& s, RoundBeats& beats) {
  switch (e.phase) {
    case TimelinePhase::kFirstBeat:
      beats.first[e.rank] = e.time_ms;
      break;
    case TimelinePhase::kLastBeat:
      beats.last[e.rank] = e.time_ms;
      break;
    case TimelinePhase::kFormed:
      beats.nodes.insert(e.node);
      break;
    case TimelinePhase::kFailed:
    case TimelinePhase::kLost:
      if (s.failed_ms == 0 || e.time_ms < s.failed_ms) s.failed_ms = e.time_ms;
      break;
    case TimelinePhase::kRestart:
    case TimelinePhase::kFinished:
      s.decided_ms = e.time_ms;
      s.action = e.phase == TimelinePhase::kRestart ? "restart" : "finish";
      break;
    default:
      break;
  }
}

// When every rank of the round beat, and until when: from the round's beats.
void settle_beats(RoundSpan& s, const RoundBeats& beats) {
  s.nodes = static_cast<int>(beats.nodes.size());
  if (s.world_size == 0) s.world_size = static_cast<int>(beats.first.size());
  if (beats.first.empty() || static_cast<int>(beats.first.size()) < s.world_size) return;
  int64_t all = 0;
  for (const auto& [rank, at] : beats.first) all = std::max(all, at);
  int64_t end = std::numeric_limits<int64_t>::max();
  for (const auto& [rank, at] : beats.last) end = std::min(end, at);
  s.all_beating_ms = all;
  s.beats_end_ms = beats.last.size() < beats.first.size() ? all : end;
}

void apply_records(const RunTimeline& run, std::map<uint64_t, RoundSpan>& spans) {
  for (const RoundRecord& r : run.rounds) {
    RoundSpan& s = span_of(spans, r.round);
    s.began_ms = r.blame.value("began", int64_t{0});
    s.formed_ms = r.blame.value("formed", int64_t{0});
    s.world_size = r.blame.value("world_size", 0);
    s.membership_change = r.decision.value("membership_change", false);
    const auto cause = r.decision.find("root_cause");
    if (cause != r.decision.end() && cause->is_object()) s.cause = cause->value("description", "");
  }
}

void add_restart_costs(JobFigures& f) {
  for (size_t i = 0; i < f.rounds.size(); ++i) {
    const RoundSpan& s = f.rounds[i];
    if (s.action != "restart") continue;
    if (s.membership_change) {
      ++f.reforms;
      continue;
    }
    ++f.restarts;
    RestartCost cost;
    cost.failed_round = s.round;
    cost.cause = s.cause;
    cost.stopped_ms = s.beats_end_ms > 0 ? s.beats_end_ms
                      : s.failed_ms > 0  ? s.failed_ms
                                         : s.decided_ms;
    if (i + 1 < f.rounds.size()) cost.resumed_ms = f.rounds[i + 1].all_beating_ms;
    cost.lost_ms =
        std::max<int64_t>(0, (cost.resumed_ms > 0 ? cost.resumed_ms : f.end_ms) - cost.stopped_ms);
    f.restart_costs.push_back(cost);
  }
}

}  // namespace

JobFigures job_figures(const RunTimeline& run) {
  JobFigures f;
  std::map<uint64_t, RoundSpan> spans;
  std::map<uint64_t, RoundBeats> beats;
  f.start_ms = std::numeric_limits<int64_t>::max();
  for (const TimelineEvent& e : run.events) {
    f.start_ms = std::min(f.start_ms, e.time_ms);
    f.end_ms = std::max(f.end_ms, e.time_ms);
    note_event(e, span_of(spans, e.round), beats[e.round]);
  }
  if (run.events.empty()) f.start_ms = 0;
  apply_records(run, spans);
  for (const RoundRecord& r : run.rounds) {
    if (r.decision.value("action", "") == "finish") {
      f.exit_code = r.decision.value("exit_code", f.exit_code);
      const int64_t decided = spans[r.round].decided_ms;
      if (decided > 0) f.end_ms = decided;
    }
  }
  for (auto& [round, s] : spans) {
    settle_beats(s, beats[round]);
    if (s.began_ms == 0) s.began_ms = round == 0 ? f.start_ms : s.formed_ms;
    f.max_nodes = std::max(f.max_nodes, s.nodes);
    f.max_ranks = std::max(f.max_ranks, s.world_size);
    f.beating_ms += s.beating_ms();
    if (f.time_to_first_step_ms < 0 && s.all_beating_ms > 0)
      f.time_to_first_step_ms = s.all_beating_ms - f.start_ms;
    f.rounds.push_back(s);
  }
  f.wall_ms = std::max<int64_t>(0, f.end_ms - f.start_ms);
  f.goodput =
      f.wall_ms > 0 ? static_cast<double>(f.beating_ms) / static_cast<double>(f.wall_ms) : 0;
  add_restart_costs(f);
  return f;
}

}  // namespace npu_run
