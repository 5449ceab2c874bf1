#include "rendezvous/state/straggler_desk.hpp"

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
  open_.clear();
  open_entries_ = 0;
  group_ranks_.clear();
  watch_ = StragglerWatch(kThreshold, kWindows);
  current_.reset();
}

void StragglerDesk::stop() {
  active_ = false;
  open_.clear();
  open_entries_ = 0;
  group_ranks_.clear();
  current_.reset();
}

int StragglerDesk::node_of(int rank) const {
  const auto after = std::upper_bound(offsets_.begin(), offsets_.end(), rank);
  return static_cast<int>(after - offsets_.begin()) - 1;
}

int StragglerDesk::unit_size(int unit) const {
  if (offsets_.size() <= 1) return 1;
  const size_t u = static_cast<size_t>(unit);
  return (u + 1 < offsets_.size() ? offsets_[u + 1] : world_) - offsets_[u];
}

void StragglerDesk::drop_oldest() {
  open_entries_ -= open_.begin()->second.units.size();
  open_.erase(open_.begin());
}

void StragglerDesk::add(int node_rank, const CollectiveSample& sample) {
  if (!active_ || sample.round != round_) return;
  for (const RankSample& r : sample.ranks) {
    // A node speaks for its own ranks only: a misbehaving one cannot blame another.
    if (r.rank < 0 || r.rank >= world_ || node_of(r.rank) != node_rank) continue;
    const int unit = unit_of(r.rank);
    for (const EnteredCall& c : r.calls) {
      auto group = group_ranks_.find(c.group);
      if (group == group_ranks_.end()) {
        if (group_ranks_.size() >= kMaxGroups) continue;
        group = group_ranks_.emplace(c.group, std::set<int>{}).first;
      }
      group->second.insert(r.rank);
      OpenCall& call = open_[{c.group, c.seq}];
      const auto [it, added] = call.units.try_emplace(unit);
      open_entries_ += added ? 1 : 0;
      UnitEntry& entry = it->second;
      // Counted up to the unit's size: a node repeating a call cannot complete it early.
      if (entry.ranks < unit_size(unit)) ++entry.ranks, ++call.ranks;
      if (entry.latest_rank < 0 || c.entered_ms > entry.latest_ms)
        entry = {c.entered_ms, r.rank, entry.ranks};
      call.first_ms = std::min(call.first_ms, c.entered_ms);
    }
  }
  while (!open_.empty() && (open_.size() > kMaxOpen || open_entries_ > kMaxOpenEntries))
    drop_oldest();
}

StragglerDesk::Calls StragglerDesk::take_complete() {
  Calls done;
  const int64_t stale_before = due_ms_ - 4 * window_ms_;
  for (auto it = open_.begin(); it != open_.end();) {
    const size_t group_size = group_ranks_[it->first.first].size();
    const OpenCall& call = it->second;
    const bool complete =
        group_size >= 2 && call.units.size() >= 2 && static_cast<size_t>(call.ranks) == group_size;
    const bool stale = !complete && call.first_ms < stale_before;
    if (!complete && !stale) {
      ++it;
      continue;
    }
    open_entries_ -= call.units.size();
    if (complete) done.insert(*it);
    it = open_.erase(it);
  }
  return done;
}

std::optional<NamedStraggler> StragglerDesk::score_if_due(int64_t now_ms) {
  if (!active_ || now_ms < due_ms_) return std::nullopt;
  due_ms_ = now_ms + window_ms_;
  const Calls window = take_complete();
  if (window.size() < static_cast<size_t>(kMinCollectives)) return std::nullopt;
  // One entry per unit and collective, its last rank's: score_window compares the units.
  std::map<int, RankSample> units;
  int64_t first_ms = INT64_MAX;
  int64_t last_ms = 0;
  for (const auto& [key, call] : window) {
    for (const auto& [unit, entry] : call.units) {
      units[unit].rank = unit;
      units[unit].calls.push_back({key.first, key.second, entry.latest_ms});
      last_ms = std::max(last_ms, entry.latest_ms);
    }
    first_ms = std::min(first_ms, call.first_ms);
  }
  std::vector<RankSample> samples;
  samples.reserve(units.size());
  for (auto& [id, unit] : units) samples.push_back(std::move(unit));
  // Over the training time these collectives span: calls an agent gave up to fit its frame are
  // outside it, not time nobody waited in.
  WindowScore score = score_window(samples, std::max<int64_t>(last_ms - first_ms, 1));
  score.share = std::min(score.share, 1.0);
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

NamedStraggler StragglerDesk::name(const Straggler& s, const Calls& window) const {
  NamedStraggler out;
  out.score = s;
  if (offsets_.size() <= 1) {
    out.rank = s.rank;
    out.text = describe(s);
    return out;
  }
  out.node_rank = s.rank;
  std::map<int, int> last_counts;  // how often each of the node's ranks was the last one in
  for (const auto& [key, call] : window) {
    const auto last = std::max_element(
        call.units.begin(), call.units.end(),
        [](const auto& a, const auto& b) { return a.second.latest_ms < b.second.latest_ms; });
    if (last->first == s.rank) ++last_counts[last->second.latest_rank];
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
