#include "agent/records/agent_metrics.hpp"

#include <algorithm>
#include <string>

#include "workers/progress_beats.hpp"

namespace npu_run {

namespace {

double seconds_between(AgentMetrics::Clock::time_point from, AgentMetrics::Clock::time_point to) {
  return std::chrono::duration<double>(to - from).count();
}

const char* class_label(const rdzv::Decision& d) {
  if (d.membership_change) return "membership";
  switch (d.failure_class) {
    case rdzv::FailureClass::kInfrastructure:
      return "infrastructure";
    case rdzv::FailureClass::kDeterministic:
      return "deterministic";
    case rdzv::FailureClass::kOther:
    case rdzv::FailureClass::kNone:
      break;
  }
  return "other";
}

void write_beats(MetricsText& out, const NodeView& node, AgentMetrics::Clock::time_point now) {
  size_t beating = 0;
  const int ranks = node.beats ? node.beats->local_ranks() : 0;
  out.family("npu_run_rank_beats", "gauge", "Progress beats of each local rank in this attempt");
  for (int r = 0; r < ranks; ++r) {
    const RankProgress& p = node.beats->rank(r);
    out.sample("npu_run_rank_beats", static_cast<double>(p.beats),
               {{"local_rank", std::to_string(r)}, {"rank", std::to_string(node.rank_offset + r)}});
  }
  out.family("npu_run_rank_last_beat_age_seconds", "gauge",
             "Seconds since each local rank's last beat (ranks that beat in this attempt)");
  for (int r = 0; r < ranks; ++r) {
    const RankProgress& p = node.beats->rank(r);
    if (p.beats == 0) continue;
    const double age = std::max(0.0, seconds_between(p.last, now));
    beating += age <= static_cast<double>(kBeatingWithin.count()) ? 1 : 0;
    out.sample("npu_run_rank_last_beat_age_seconds", age,
               {{"local_rank", std::to_string(r)}, {"rank", std::to_string(node.rank_offset + r)}});
  }
  out.gauge("npu_run_ranks_beating", "Local ranks whose last beat is at most 60 s old",
            static_cast<double>(beating));
}

}  // namespace

void AgentMetrics::seated(Clock::time_point at) {
  ++rounds;
  assigned = at;
  phase_seconds.erase("start");
  phase_seconds.erase("first_beat");
  phase_seconds.erase("run");
  if (joined != Clock::time_point{}) phase_seconds["rendezvous"] = seconds_between(joined, at);
}

void AgentMetrics::workers_spawned(Clock::time_point at) {
  spawned = at;
  phase_seconds["start"] = seconds_between(assigned, at);
}

void AgentMetrics::workers_done(Clock::time_point at) {
  if (spawned != Clock::time_point{}) phase_seconds["run"] = seconds_between(spawned, at);
}

void AgentMetrics::decided(const rdzv::Decision& decision) {
  if (decision.action == rdzv::Action::kRestart) ++restarts[class_label(decision)];
}

void write_agent_metrics(MetricsText& out, const AgentMetrics& m, const NodeView& node,
                         AgentMetrics::Clock::time_point now) {
  out.gauge("npu_run_agent_info", "This agent: its host and state (always 1)", 1,
            {{"host", node.host}, {"state", node.state}});
  out.counter("npu_run_rounds_total", "Rounds this node held a seat in",
              static_cast<double>(m.rounds));
  out.family("npu_run_restarts_total", "counter",
             "Restarts of the job this node heard of, by class of the root cause");
  for (const char* cls : {"infrastructure", "deterministic", "other", "membership"}) {
    const auto it = m.restarts.find(cls);
    out.sample("npu_run_restarts_total",
               it == m.restarts.end() ? 0 : static_cast<double>(it->second), {{"class", cls}});
  }
  std::map<std::string, double> phases = m.phase_seconds;
  if (node.beats && node.beats->local_ranks() > 0 &&
      m.spawned != AgentMetrics::Clock::time_point{}) {
    // Every local rank's first beat: the last of them, as seen now.
    bool all = true;
    auto last_first = std::chrono::system_clock::time_point{};
    for (int r = 0; r < node.beats->local_ranks(); ++r) {
      const RankProgress& p = node.beats->rank(r);
      all = all && p.beats > 0;
      last_first = std::max(last_first, p.first_wall);
    }
    if (all) {
      const auto since = std::chrono::system_clock::now() - last_first;
      phases["first_beat"] = std::max(0.0, seconds_between(m.spawned, now - since));
    }
  }
  out.family("npu_run_phase_seconds", "gauge", "Seconds each phase of this node's last round took");
  for (const auto& [phase, seconds] : phases)
    out.sample("npu_run_phase_seconds", seconds, {{"phase", phase}});
  write_beats(out, node, now);
  out.gauge("npu_run_workers_alive", "This node's worker processes still running",
            static_cast<double>(node.workers_alive));
}

}  // namespace npu_run
