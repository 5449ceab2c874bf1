#include "agent/snapshots/copy_ledger.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <map>

namespace npu_run {

CopyLedger::Begun CopyLedger::begin(int rank, int64_t step, uint64_t bytes, int world_size) {
  Begun out;
  if (world_size != world_size_) {
    out.dropped = drop_unless_world(world_size);
    world_size_ = world_size;
  }
  for (std::string& name :
       remove_where([&](const HeldCopy& c) { return c.rank == rank && c.step == step; })) {
    out.dropped.push_back(std::move(name));
  }
  out.name = fmt::format("copy-{}-{}-{}", rank, step, next_++);
  copies_.push_back(HeldCopy{rank, step, bytes, out.name, false});
  return out;
}

std::vector<std::string> CopyLedger::complete(const std::string& name) {
  const auto it = std::find_if(copies_.begin(), copies_.end(),
                               [&](const HeldCopy& c) { return c.name == name; });
  if (it == copies_.end()) return {};
  it->complete = true;
  const int rank = it->rank;
  std::vector<int64_t> steps;  // the rank's complete ones, newest first
  for (const HeldCopy& c : copies_) {
    if (c.rank == rank && c.complete) steps.push_back(c.step);
  }
  std::sort(steps.rbegin(), steps.rend());
  if (steps.size() <= 2) return {};
  const int64_t oldest_kept = steps[1];
  return remove_where(
      [&](const HeldCopy& c) { return c.rank == rank && c.complete && c.step < oldest_kept; });
}

std::string CopyLedger::abandon(const std::string& name) {
  const auto gone = remove_where([&](const HeldCopy& c) { return c.name == name; });
  return gone.empty() ? std::string() : gone.front();
}

const HeldCopy* CopyLedger::find(int rank, int64_t step) const {
  for (const HeldCopy& c : copies_) {
    if (c.rank == rank && c.step == step && c.complete) return &c;
  }
  return nullptr;
}

std::vector<std::string> CopyLedger::drop_after(int64_t step) {
  return remove_where([&](const HeldCopy& c) { return c.step > step; });
}

std::vector<std::string> CopyLedger::drop_oldest() {
  if (copies_.empty()) return {};
  const auto oldest =
      std::min_element(copies_.begin(), copies_.end(),
                       [](const HeldCopy& a, const HeldCopy& b) { return a.step < b.step; });
  const int64_t step = oldest->step;
  return remove_where([&](const HeldCopy& c) { return c.step == step; });
}

std::vector<std::string> CopyLedger::drop_unless_world(int world_size) {
  if (world_size == world_size_) return {};
  return remove_where([](const HeldCopy&) { return true; });
}

std::vector<rdzv::SnapshotRange> CopyLedger::ranges(size_t max_ranges) const {
  std::map<int, std::vector<int64_t>> by_rank;
  for (const HeldCopy& c : copies_) {
    if (c.complete) by_rank[c.rank].push_back(c.step);
  }
  std::vector<rdzv::SnapshotRange> out;
  for (auto& [rank, steps] : by_rank) {
    std::sort(steps.begin(), steps.end());
    if (!out.empty() && out.back().last_rank + 1 == rank && out.back().memory == steps) {
      out.back().last_rank = rank;
      continue;
    }
    if (out.size() == max_ranges) break;  // the wire's bound: the lowest ranks are said
    out.push_back(rdzv::SnapshotRange{rank, rank, steps, {}});
  }
  return out;
}

uint64_t CopyLedger::used() const {
  uint64_t total = 0;
  for (const HeldCopy& c : copies_) total += c.bytes;
  return total;
}

std::vector<std::string> CopyLedger::remove_where(
    const std::function<bool(const HeldCopy&)>& which) {
  std::vector<std::string> names;
  const auto keep = std::stable_partition(copies_.begin(), copies_.end(),
                                          [&](const HeldCopy& c) { return !which(c); });
  for (auto it = keep; it != copies_.end(); ++it) names.push_back(it->name);
  copies_.erase(keep, copies_.end());
  return names;
}

}  // namespace npu_run
