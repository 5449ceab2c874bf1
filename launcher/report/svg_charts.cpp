#include "report/svg_charts.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>

namespace npu_run {

namespace {

using rdzv::TimelineEvent;
using rdzv::TimelinePhase;

constexpr double kWidth = 1000;  // the viewBox; the page scales it to the screen
constexpr double kLabels = 150;  // room for the node names
constexpr double kTop = 18;      // room for the round marks

// Maps wall-clock times onto the plot's x axis.
struct TimeAxis {
  int64_t start = 0;
  int64_t end = 1;
  double x(int64_t ms) const {
    const double span = static_cast<double>(std::max<int64_t>(end - start, 1));
    const double t = static_cast<double>(std::clamp(ms, start, end) - start) / span;
    return kLabels + t * (kWidth - kLabels - 4);
  }
};

// What one node did in one round, by the times of its events (0: did not happen).
struct NodeRound {
  std::string host;
  int64_t agent_start = 0, join = 0, gate = 0, formed = 0, spawned = 0, failed = 0, lost = 0,
          exited = 0;
};

using NodeRounds = std::map<int, std::map<uint64_t, NodeRound>>;  // node -> round -> what

NodeRounds node_rounds(const RunTimeline& run) {
  NodeRounds nodes;
  for (const TimelineEvent& e : run.events) {
    if (e.node < 0) continue;
    NodeRound& n = nodes[e.node][e.round];
    n.host = e.host;
    auto first = [&](int64_t& slot) {
      if (slot == 0 || e.time_ms < slot) slot = e.time_ms;
    };
    switch (e.phase) {
      case TimelinePhase::kAgentStart:
        first(n.agent_start);
        break;
      case TimelinePhase::kJoin:
        first(n.join);
        break;
      case TimelinePhase::kGate:
        n.gate = e.time_ms;
        break;
      case TimelinePhase::kFormed:
        first(n.formed);
        break;
      case TimelinePhase::kSpawned:
        first(n.spawned);
        break;
      case TimelinePhase::kFailed:
        first(n.failed);
        break;
      case TimelinePhase::kLost:
        first(n.lost);
        break;
      case TimelinePhase::kExited:
        n.exited = std::max(n.exited, e.time_ms);
        break;
      default:
        break;
    }
  }
  return nodes;
}

// Rectangles of one kind as one path: "M x y h w v h h -w z" each.
class Bars {
 public:
  void add(double x0, double x1, double y, double h) {
    if (x1 < x0) return;
    const double w = std::max(x1 - x0, 0.8);
    d_ += fmt::format("M{:.1f} {:.1f}h{:.1f}v{:.1f}h{:.1f}z", x0, y, w, h, -w);
  }
  std::string path(const char* kind) const {
    return d_.empty() ? "" : fmt::format("<path class=\"{}\" d=\"{}\"/>", kind, d_);
  }

 private:
  std::string d_;
};

struct NodeBars {
  Bars wait, gate, run, failed, restart;
};

void draw_node_round(const NodeRound& n, int64_t round_start, const RoundSpan* span,
                     const TimeAxis& axis, double y, double h, NodeBars& bars) {
  const int64_t start =
      n.agent_start > 0 ? n.agent_start : (round_start > 0 ? round_start : n.join);
  const int64_t formed = n.formed > 0 ? n.formed : (span ? span->formed_ms : 0);
  if (start > 0 && formed > 0) bars.wait.add(axis.x(start), axis.x(formed), y, h);
  if (n.gate > 0 && n.join > 0) bars.gate.add(axis.x(n.join), axis.x(n.gate), y, h);
  const int64_t end_of_round = span && span->decided_ms > 0 ? span->decided_ms : axis.end;
  const int64_t stop = n.failed > 0   ? n.failed
                       : n.lost > 0   ? n.lost
                       : n.exited > 0 ? n.exited
                                      : end_of_round;
  const int64_t run_from = n.spawned > 0 ? n.spawned : formed;
  if (run_from > 0) bars.run.add(axis.x(run_from), axis.x(stop), y, h);
  const int64_t stopped = n.exited > 0 ? n.exited : end_of_round;
  // At least a few units wide: a failure is what the eye looks for.
  if (n.failed > 0 || n.lost > 0)
    bars.failed.add(axis.x(stop), std::max(axis.x(stop) + 3, axis.x(std::max(stop, stopped))), y,
                    h);
  if (span && span->action == "restart" && span->decided_ms > 0)
    bars.restart.add(axis.x(stopped), axis.x(span->decided_ms), y, h);
}

std::string node_label(int node, const std::map<uint64_t, NodeRound>& rounds) {
  std::vector<std::string> hosts;
  for (const auto& [round, n] : rounds) {
    if (hosts.empty() || hosts.back() != n.host) hosts.push_back(n.host);
  }
  std::string text = fmt::format("{} {}", node, hosts.empty() ? "" : hosts.front());
  if (hosts.size() > 1) text += fmt::format(" \u2192 {}", hosts.back());  // a spare took over
  return text.size() > 28 ? text.substr(0, 27) + "\u2026" : text;
}

std::string round_marks(const JobFigures& f, const TimeAxis& axis, double height) {
  std::string out;
  for (const RoundSpan& s : f.rounds) {
    if (s.formed_ms <= 0) continue;
    const double x = axis.x(s.formed_ms);
    out += fmt::format(
        "<line class=\"mark\" x1=\"{0:.1f}\" x2=\"{0:.1f}\" y1=\"{1}\" y2=\"{2:.1f}\"/>"
        "<text class=\"small\" x=\"{3:.1f}\" y=\"12\">round {4}</text>",
        x, kTop - 4, height, x + 2, s.round);
  }
  return out;
}

std::string time_ticks(const TimeAxis& axis, double y) {
  std::string out;
  const double seconds = static_cast<double>(axis.end - axis.start) / 1000.0;
  const double step = seconds <= 10     ? 1
                      : seconds <= 60   ? 10
                      : seconds <= 600  ? 60
                      : seconds <= 3600 ? 600
                                        : 3600;
  const auto ticks = static_cast<int>(seconds / step);
  for (int i = 0; i <= ticks; ++i) {
    const double t = step * i;
    const double x = axis.x(axis.start + static_cast<int64_t>(t * 1000));
    out += fmt::format("<text class=\"small\" x=\"{:.1f}\" y=\"{:.1f}\">{:g} s</text>", x, y, t);
  }
  return out;
}

}  // namespace

std::string html_escape(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string node_timeline_svg(const RunTimeline& run, const JobFigures& f) {
  const NodeRounds nodes = node_rounds(run);
  const TimeAxis axis{f.start_ms, std::max(f.end_ms, f.start_ms + 1)};
  // Rows thinner than a pixel blend: a thousand nodes fit one screen, and a failed node's red
  // still tints its row.
  const double row =
      std::clamp(600.0 / static_cast<double>(std::max<size_t>(nodes.size(), 1)), 0.5, 16.0);
  const double height = kTop + row * static_cast<double>(nodes.size()) + 16;
  std::map<uint64_t, const RoundSpan*> spans;
  for (const RoundSpan& s : f.rounds) spans[s.round] = &s;
  NodeBars bars;
  std::string labels;
  double y = kTop;
  for (const auto& [node, rounds] : nodes) {
    for (const auto& [round, n] : rounds) {
      const auto span = spans.find(round);
      const RoundSpan* s = span == spans.end() ? nullptr : span->second;
      const auto before = spans.find(round - 1);
      const int64_t round_start =
          round > 0 && before != spans.end() ? before->second->decided_ms : (s ? s->began_ms : 0);
      draw_node_round(n, round_start, s, axis, y + row * 0.1, row * 0.8, bars);
    }
    if (row >= 8) {
      labels += fmt::format("<text class=\"label\" x=\"2\" y=\"{:.1f}\">{}</text>", y + row * 0.75,
                            html_escape(node_label(node, rounds)));
    }
    y += row;
  }
  return fmt::format(
      "<svg class=\"chart\" viewBox=\"0 0 {} {:.0f}\" role=\"img\" aria-label=\"rounds per node\">"
      "{}{}{}{}{}{}{}{}{}</svg>",
      kWidth, height, round_marks(f, axis, height - 14), bars.wait.path("wait"),
      bars.gate.path("gate"), bars.run.path("run"), bars.failed.path("failed"),
      bars.restart.path("restart"), labels, time_ticks(axis, height - 2),
      row < 8 ? fmt::format("<text class=\"small\" x=\"2\" y=\"{:.0f}\">nodes 0\u2013{}</text>",
                            kTop + 10, nodes.empty() ? 0 : nodes.rbegin()->first)
              : "");
}

namespace {

struct Series {
  int rank = -1;
  int node = -1;
  std::vector<std::pair<int64_t, int64_t>> points;  // time, step
};

std::vector<Series> beat_series(const RunTimeline& run) {
  std::map<std::pair<uint64_t, int>, Series> by_round_rank;
  for (const TimelineEvent& e : run.events) {
    if (e.rank < 0 || e.step < 0) continue;
    if (e.phase != TimelinePhase::kBeat && e.phase != TimelinePhase::kLastBeat) continue;
    Series& s = by_round_rank[{e.round, e.rank}];
    s.rank = e.rank;
    s.node = e.node;
    s.points.emplace_back(e.time_ms, e.step);
  }
  std::set<int> ranks;
  for (const auto& [key, s] : by_round_rank) ranks.insert(key.second);
  std::vector<Series> out;
  if (ranks.size() <= kMaxRankLines) {
    for (auto& [key, s] : by_round_rank) out.push_back(std::move(s));
    return out;
  }
  // Too many ranks to tell apart: each node's slowest rank (the lowest last step) per round.
  std::map<std::pair<uint64_t, int>, Series> slowest;
  for (auto& [key, s] : by_round_rank) {
    auto& best = slowest[{key.first, s.node}];
    if (best.points.empty() || s.points.back().second < best.points.back().second) best = s;
  }
  for (auto& [key, s] : slowest) out.push_back(std::move(s));
  return out;
}

std::string polyline(const Series& s, const TimeAxis& axis, double top, double height,
                     int64_t max_step) {
  std::vector<std::pair<int64_t, int64_t>> points = s.points;
  std::sort(points.begin(), points.end());
  std::string xy;
  const size_t n = points.size();
  const size_t shown = std::min(n, kMaxLinePoints);
  for (size_t i = 0; i < shown; ++i) {
    // Evenly spread over the series, the last point always in.
    const size_t at = shown == 1 ? n - 1 : i * (n - 1) / (shown - 1);
    const double y = top + height -
                     height * static_cast<double>(points[at].second) /
                         static_cast<double>(std::max<int64_t>(max_step, 1));
    xy += fmt::format("{}{:.1f},{:.1f}", i == 0 ? "" : " ", axis.x(points[at].first), y);
  }
  const int hue = (s.node * 137 + s.rank * 11) % 360;
  return fmt::format("<polyline stroke=\"hsl({},60%,42%)\" points=\"{}\"/>", hue, xy);
}

}  // namespace

std::string beats_svg(const RunTimeline& run, const JobFigures& f) {
  const std::vector<Series> series = beat_series(run);
  const TimeAxis axis{f.start_ms, std::max(f.end_ms, f.start_ms + 1)};
  int64_t max_step = 0;
  for (const Series& s : series) {
    for (const auto& [t, step] : s.points) max_step = std::max(max_step, step);
  }
  constexpr double kHeight = 260;
  std::string lines;
  for (const Series& s : series) lines += polyline(s, axis, kTop, kHeight - kTop - 20, max_step);
  return fmt::format(
      "<svg class=\"chart\" viewBox=\"0 0 {} {}\" role=\"img\" aria-label=\"beats over time\">"
      "{}<text class=\"small\" x=\"2\" y=\"{}\">step {}</text>"
      "<text class=\"small\" x=\"2\" y=\"{}\">0</text><g class=\"lines\">{}</g>{}</svg>",
      kWidth, kHeight, round_marks(f, axis, kHeight - 18), kTop + 8, max_step, kHeight - 22, lines,
      time_ticks(axis, kHeight - 4));
}

}  // namespace npu_run
