#include "rendezvous/straggler_desk.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace npu_run::rdzv {

std::string announcement(const NamedStraggler& named, StragglerMode mode) {
  if (named.node_rank < 0) return "straggler: " + named.text;
  return fmt::format("straggler: {}; {}", named.text,
                     mode == StragglerMode::kReplace
                         ? "its seat goes to a ready spare (--straggler replace)"
                         : "--straggler replace would hand its seat to a ready spare");
}

void StragglerDesk::begin(uint64_t round, std::vector<int> rank_offsets,
                          std::vector<std::string> hosts, int world_size, int64_t window_ms,
                          int64_t now_ms) {
  active_ = true;
  round_ = round;
  offsets_ = std::move(rank_offsets);
  hosts_ = std::move(hosts);
  hosts_.resize(offsets_.size());
  world_ = world_size;
  window_ms_ = std::max<int64_t>(window_ms, 1);
  due_ms_ = now_ms + window_ms_;
  covered_until_ms_ = 0;
  open_.clear();
  group_ranks_.clear();
  watch_ = StragglerWatch(kThreshold, kWindows);
  current_.reset();
}

void StragglerDesk::stop() {
  active_ = false;
  open_.clear();
  group_ranks_.clear();
  current_.reset();
}

int StragglerDesk::node_of(int rank) const {
  const auto after = std::upper_bound(offsets_.begin(), offsets_.end(), rank);
  return static_cast<int>(after - offsets_.begin()) - 1;
}

void StragglerDesk::add(int node_rank, const CollectiveSample& sample) {
  if (!active_ || sample.round != round_) return;
  for (const RankSample& r : sample.ranks) {
    // A node speaks for its own ranks only: a misbehaving one cannot blame another.
    if (r.rank < 0 || r.rank >= world_ || node_of(r.rank) != node_rank) continue;
    for (const EnteredCall& c : r.calls) {
      auto group = group_ranks_.find(c.group);
      if (group == group_ranks_.end()) {
        if (group_ranks_.size() >= kMaxGroups) continue;
        group = group_ranks_.emplace(c.group, std::set<int>{}).first;
      }
      group->second.insert(r.rank);
      open_[{c.group, c.seq}][r.rank] = c.entered_ms;
    }
  }
  while (open_.size() > kMaxOpen) open_.erase(open_.begin());
}

std::map<StragglerDesk::CallKey, std::map<int, int64_t>> StragglerDesk::take_complete() {
  std::map<CallKey, std::map<int, int64_t>> done;
  const int64_t stale_before = due_ms_ - 4 * window_ms_;
  for (auto it = open_.begin(); it != open_.end();) {
    const size_t group_size = group_ranks_[it->first.first].size();
    const bool complete = group_size >= 2 && it->second.size() == group_size;
    const bool stale = !complete && it->second.begin()->second < stale_before;
    if (complete) done.insert(*it);
    it = complete || stale ? open_.erase(it) : std::next(it);
  }
  return done;
}

std::optional<NamedStraggler> StragglerDesk::score_if_due(int64_t now_ms) {
  if (!active_ || now_ms < due_ms_) return std::nullopt;
  due_ms_ = now_ms + window_ms_;
  const auto window = take_complete();
  if (window.size() < static_cast<size_t>(kMinCollectives)) return std::nullopt;
  std::map<int, RankSample> units;
  int64_t first_ms = INT64_MAX;
  int64_t last_ms = 0;
  for (const auto& [key, entries] : window) {
    for (const auto& [rank, ms] : entries) {
      RankSample& unit = units[unit_of(rank)];
      unit.rank = unit_of(rank);
      unit.calls.push_back({key.first, key.second, ms});
      first_ms = std::min(first_ms, ms);
      last_ms = std::max(last_ms, ms);
    }
  }
  // A node's unit holds one entry per rank of each collective: score_window sees them all.
  std::vector<RankSample> samples;
  for (auto& [id, unit] : units) samples.push_back(std::move(unit));
  const int64_t from_ms = covered_until_ms_ > 0 ? std::min(covered_until_ms_, first_ms) : first_ms;
  covered_until_ms_ = std::max(covered_until_ms_, last_ms);
  const WindowScore score = score_window(samples, std::max<int64_t>(last_ms - from_ms, 1));
  const std::optional<Straggler> named = watch_.add(score);
  if (current_ && (score.rank != current_->score.rank || score.share <= kThreshold))
    current_.reset();
  if (!named) return std::nullopt;
  current_ = name(*named, window);
  return current_;
}

std::string StragglerDesk::ranks_text(int node) const {
  const int first = offsets_[static_cast<size_t>(node)];
  const int end = static_cast<size_t>(node) + 1 < offsets_.size()
                      ? offsets_[static_cast<size_t>(node) + 1]
                      : world_;
  const std::string& host = hosts_[static_cast<size_t>(node)];
  const std::string ranks =
      end - first <= 1 ? fmt::format("rank {}", first) : fmt::format("ranks {}-{}", first, end - 1);
  return host.empty() ? ranks : host + ", " + ranks;
}

NamedStraggler StragglerDesk::name(const Straggler& s,
                                   const std::map<CallKey, std::map<int, int64_t>>& window) const {
  NamedStraggler out;
  out.score = s;
  if (offsets_.size() <= 1) {
    out.rank = s.rank;
    out.text = describe(s);
    return out;
  }
  out.node_rank = s.rank;
  std::map<int, int> last_counts;  // how often each of the node's ranks entered last
  for (const auto& [key, entries] : window) {
    const auto last =
        std::max_element(entries.begin(), entries.end(),
                         [](const auto& a, const auto& b) { return a.second < b.second; });
    if (node_of(last->first) == s.rank) ++last_counts[last->first];
  }
  out.rank = offsets_[static_cast<size_t>(s.rank)];
  int best = -1;
  for (const auto& [rank, n] : last_counts) {
    if (n > best) best = n, out.rank = rank;
  }
  out.text = fmt::format(
      "node {} ({}) entered collectives last, keeping its peers waiting {:.0f} % of the time "
      "({:.1f} s) over the last {} windows; rank {} most often",
      s.rank, ranks_text(s.rank), s.share * 100, static_cast<double>(s.cost_ms) / 1000.0, s.windows,
      out.rank);
  return out;
}

}  // namespace npu_run::rdzv
