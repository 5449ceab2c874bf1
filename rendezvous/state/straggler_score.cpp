#include "rendezvous/state/straggler_score.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <utility>

namespace npu_run::rdzv {

namespace {

using CallKey = std::pair<std::string, int64_t>;  // group, sequence number

// Who entered each collective, and when.
std::map<CallKey, std::vector<std::pair<int64_t, int>>> entries_by_call(
    const std::vector<RankSample>& samples) {
  std::map<CallKey, std::vector<std::pair<int64_t, int>>> calls;
  for (const RankSample& s : samples) {
    for (const EnteredCall& c : s.calls) calls[{c.group, c.seq}].emplace_back(c.entered_ms, s.rank);
  }
  return calls;
}

// The last rank's lateness: from the median entry of the others to its own.
std::pair<int, int64_t> lateness(std::vector<std::pair<int64_t, int>> entries) {
  std::sort(entries.begin(), entries.end());
  const auto [last_ms, last_rank] = entries.back();
  const size_t others = entries.size() - 1;
  const int64_t median = entries[others / 2].first;  // of the others: entries[0..others)
  return {last_rank, last_ms - median};
}

}  // namespace

WindowScore score_window(const std::vector<RankSample>& samples, int64_t window_ms,
                         int64_t tolerance_ms) {
  WindowScore score;
  std::map<int, int64_t> cost;  // by rank
  for (const auto& [key, entries] : entries_by_call(samples)) {
    if (entries.size() < 2) continue;
    ++score.collectives;
    const auto [rank, late_ms] = lateness(entries);
    if (late_ms > tolerance_ms) cost[rank] += late_ms;
  }
  for (const auto& [rank, ms] : cost) {
    if (ms > score.cost_ms) score = WindowScore{rank, ms, 0, score.collectives};
  }
  if (window_ms > 0)
    score.share = static_cast<double>(score.cost_ms) / static_cast<double>(window_ms);
  return score;
}

std::optional<Straggler> StragglerWatch::add(const WindowScore& score) {
  if (score.rank < 0 || score.share <= threshold_) {
    run_ = {};
    named_ = false;
    return std::nullopt;
  }
  if (score.rank != run_.rank) {
    run_ = Straggler{score.rank, 0, 0, 0};
    named_ = false;
  }
  run_.share = (run_.share * run_.windows + score.share) / (run_.windows + 1);
  run_.cost_ms += score.cost_ms;
  ++run_.windows;
  if (named_ || run_.windows < windows_) return std::nullopt;
  named_ = true;
  return run_;
}

std::string describe(const Straggler& s) {
  return fmt::format(
      "rank {} entered collectives last, keeping its peers waiting {:.0f} % of the time ({:.1f} "
      "s) over the last {} windows",
      s.rank, s.share * 100, static_cast<double>(s.cost_ms) / 1000.0, s.windows);
}

}  // namespace npu_run::rdzv
