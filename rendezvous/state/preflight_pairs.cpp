#include "rendezvous/state/preflight_pairs.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <set>

namespace npu_run::rdzv {

namespace {

constexpr double kSlowFactor = 2.0;  // over twice the median is slow (DLRover's rule)

// The median; of two, the faster stands for the norm, so that the slower is found. (The lower
// median of more would let half the nodes measured at a busy moment count as slow.)
double median_of(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  if (n <= 2) return values.front();
  return n % 2 == 1 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

double median_time(const std::vector<GroupTime>& groups) {
  std::vector<double> times;
  for (const GroupTime& g : groups) {
    if (!g.failed) times.push_back(g.seconds);
  }
  return median_of(std::move(times));
}

bool slow(const GroupTime& g, double median) {
  return g.failed || (median > 0 && g.seconds > kSlowFactor * median);
}

std::string label_of(const std::vector<std::string>& labels, int node) {
  const auto i = static_cast<size_t>(node);
  return i < labels.size() ? labels[i] : fmt::format("node {}", node);
}

std::string group_text(const ProbeGroup& g, const std::vector<std::string>& labels) {
  if (labels.empty()) return fmt::format("nodes {}", fmt::join(g, "+"));
  std::vector<std::string> names;
  for (int node : g) names.push_back(label_of(labels, node));
  return fmt::format("{}", fmt::join(names, " and "));
}

std::string time_text(const GroupTime& g, double median) {
  if (g.failed) return "failed";
  return fmt::format("{:.3f} s, {:.1f}x the median {:.3f} s", g.seconds,
                     median > 0 ? g.seconds / median : 0.0, median);
}

// Node matmuls over twice the median: slow by themselves.
void judge_matmuls(const std::vector<double>& matmul, const std::vector<std::string>& labels,
                   ProbeFindings& out) {
  std::vector<double> measured;
  for (double s : matmul) {
    if (s > 0) measured.push_back(s);
  }
  const double median = median_of(measured);
  for (size_t rank = 0; rank < matmul.size(); ++rank) {
    if (median <= 0 || matmul[rank] <= kSlowFactor * median) continue;
    out.slow_nodes.push_back(static_cast<int>(rank));
    out.lines.push_back(fmt::format("{}: matmul {:.3f} s, {:.1f}x the median {:.3f} s",
                                    label_of(labels, static_cast<int>(rank)), matmul[rank],
                                    matmul[rank] / median, median));
  }
}

}  // namespace

std::vector<ProbeGroup> first_round(int nodes) {
  std::vector<ProbeGroup> groups;
  for (int rank = 0; rank + 1 < nodes; rank += 2) groups.push_back({rank, rank + 1});
  if (nodes > 2 && nodes % 2 == 1) groups.front().push_back(nodes - 1);
  return groups;
}

ProbeFindings judge_probe(const std::vector<double>& matmul_seconds,
                          const std::vector<GroupTime>& first, const std::vector<GroupTime>& second,
                          const std::vector<std::string>& labels) {
  ProbeFindings out;
  judge_matmuls(matmul_seconds, labels, out);
  const std::set<int> slow_alone(out.slow_nodes.begin(), out.slow_nodes.end());
  const double median = median_time(first);
  std::vector<int> suspects;
  std::vector<int> good;
  std::vector<const GroupTime*> slow_groups;
  for (const GroupTime& g : first) {
    const bool bad = slow(g, median);
    if (bad) slow_groups.push_back(&g);
    for (int node : g.nodes) (bad ? suspects : good).push_back(node);
  }
  if (good.empty() && !slow_groups.empty()) {
    out.lines.push_back(
        fmt::format("every group of the probe was slow or failed (median {:.3f} s): "
                    "nothing to tell a slow node from",
                    median));
    return out;
  }
  if (second.empty()) {
    // Each suspect (not already slow by itself) with a node of a good group of its own: a node
    // probes in one group at a time.
    size_t partner = 0;
    for (int node : suspects) {
      if (slow_alone.contains(node) || partner == good.size()) continue;
      out.next_round.push_back({good[partner++], node});
    }
    if (!out.next_round.empty()) return out;
  }
  std::set<int> slow_again;
  for (const GroupTime& g : second) {
    if (!slow(g, median)) continue;
    slow_again.insert(g.nodes.back());  // the suspect; its partner was good in round 1
    out.lines.push_back(fmt::format("{}: all_gather with good {} {}",
                                    label_of(labels, g.nodes.back()),
                                    label_of(labels, g.nodes.front()), time_text(g, median)));
  }
  for (int node : slow_again) {
    if (!slow_alone.contains(node)) out.slow_nodes.push_back(node);
  }
  for (const GroupTime* g : slow_groups) {
    const bool explained = std::any_of(g->nodes.begin(), g->nodes.end(), [&](int n) {
      return slow_alone.contains(n) || slow_again.contains(n);
    });
    if (explained || g->nodes.size() != 2) continue;
    out.slow_links.emplace_back(g->nodes[0], g->nodes[1]);
    out.lines.push_back(fmt::format("{}: all_gather {}, both fine with other partners",
                                    group_text(g->nodes, labels), time_text(*g, median)));
  }
  std::sort(out.slow_nodes.begin(), out.slow_nodes.end());
  return out;
}

}  // namespace npu_run::rdzv
