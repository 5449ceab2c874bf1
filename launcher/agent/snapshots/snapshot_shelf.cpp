#include "agent/snapshots/snapshot_shelf.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace npu_run {
namespace {

// Bookkeeping of files written, per rank: far more than anyone keeps, bounded all the same (with
// --checkpoint-keep 0 the oldest are forgotten, never deleted).
constexpr size_t kMaxStoredFiles = 64;

}  // namespace

std::string size_text(uint64_t bytes) {
  constexpr const char* kUnits[] = {"bytes", "kB", "MB", "GB", "TB"};
  double value = static_cast<double>(bytes);
  size_t unit = 0;
  while (value >= 1000 && unit + 1 < std::size(kUnits)) {
    value /= 1000;
    ++unit;
  }
  if (unit == 0) return fmt::format("{} bytes", bytes);
  if (value < 10) return fmt::format("{:.1f} {}", value, kUnits[unit]);
  return fmt::format("{:.0f} {}", value, kUnits[unit]);
}

SnapshotShelf::SnapshotShelf(int nproc, uint64_t budget, int keep)
    : nproc_(nproc), budget_(budget), keep_(keep), stored_(static_cast<size_t>(nproc)) {}

uint64_t SnapshotShelf::used() const {
  uint64_t total = 0;
  for (const Segment& s : segments_) total += s.bytes;
  return total;
}

const Segment* SnapshotShelf::find(uint64_t id) const {
  for (const Segment& s : segments_) {
    if (s.id == id) return &s;
  }
  return nullptr;
}

const Segment* SnapshotShelf::complete(int rank, int64_t step) const {
  for (const Segment& s : segments_) {
    if (s.rank == rank && s.step == step && s.complete) return &s;
  }
  return nullptr;
}

// What a new save of rank's step replaces: an older save of the same step, and the older of two
// complete ones.
std::vector<uint64_t> SnapshotShelf::displaced_by(int rank, int64_t step) const {
  std::vector<const Segment*> kept;
  std::vector<uint64_t> ids;
  for (const Segment& s : segments_) {
    if (s.rank != rank || !s.complete) continue;
    if (s.step == step)
      ids.push_back(s.id);
    else
      kept.push_back(&s);
  }
  if (kept.size() >= 2) {
    const auto oldest = std::min_element(kept.begin(), kept.end(),
                                         [](auto* a, auto* b) { return a->step < b->step; });
    ids.push_back((*oldest)->id);
  }
  return ids;
}

std::vector<std::string> SnapshotShelf::remove_if_dropped(const std::vector<uint64_t>& ids) {
  std::vector<std::string> files;
  std::erase_if(segments_, [&](const Segment& s) {
    if (std::find(ids.begin(), ids.end(), s.id) == ids.end()) return false;
    files.push_back(s.name);
    return true;
  });
  return files;
}

SnapshotShelf::Begun SnapshotShelf::begin(int rank, int64_t step, uint64_t estimate) {
  Begun out;
  if (rank < 0 || rank >= nproc_) {
    out.refusal = fmt::format("local rank {} is not one of this node's {}", rank, nproc_);
    return out;
  }
  if (budget_ == 0) {
    out.refusal = "snapshots in memory are off on this node (--checkpoint-memory 0)";
    return out;
  }
  for (const Segment& s : segments_) {
    if (s.rank == rank && !s.complete) {
      out.refusal = fmt::format("rank {} is still saving step {}", rank, s.step);
      return out;
    }
  }
  const std::vector<uint64_t> displaced = displaced_by(rank, step);
  uint64_t freed = 0;
  for (const uint64_t id : displaced) freed += find(id)->bytes;
  const uint64_t in_use = used() - freed;
  const uint64_t budget = own_budget();
  if (estimate > budget || in_use > budget - estimate) {
    out.refusal = fmt::format(
        "the snapshot of local rank {} at step {} needs about {}, and the node's snapshot memory "
        "has {} free of {} (--checkpoint-memory)",
        rank, step, size_text(estimate), size_text(budget - std::min(in_use, budget)),
        size_text(budget_));
    return out;
  }
  for (const uint64_t old : displaced) {
    const Segment* s = find(old);
    if (s->persisted && out.recycled.empty()) out.recycled = s->name;
  }
  out.dropped = remove_if_dropped(displaced);
  std::erase(out.dropped, out.recycled);
  const uint64_t id = next_id_++;
  segments_.push_back(Segment{id, rank, step, estimate, false,
                              fmt::format("rank{}_step{}_{}", rank, step, id), "", false});
  out.segment = &segments_.back();
  return out;
}

SnapshotShelf::Begun SnapshotShelf::commit(uint64_t id, uint64_t bytes, std::string path) {
  Begun out;
  const auto it = std::find_if(segments_.begin(), segments_.end(),
                               [id](const Segment& s) { return s.id == id && !s.complete; });
  if (it == segments_.end()) {
    out.refusal = "no such snapshot is being written";
    return out;
  }
  const uint64_t others = used() - it->bytes;
  const uint64_t budget = own_budget();
  if (bytes > budget || others > budget - bytes) {
    out.refusal = fmt::format(
        "the snapshot of local rank {} at step {} came to {}, more than the node's snapshot "
        "memory has free ({} of {}, --checkpoint-memory)",
        it->rank, it->step, size_text(bytes), size_text(budget - std::min(others, budget)),
        size_text(budget_));
    out.dropped = remove_if_dropped({id});
    return out;
  }
  it->bytes = bytes;
  it->complete = true;
  it->path = std::move(path);
  out.segment = &*it;
  return out;
}

std::string SnapshotShelf::abandon(uint64_t id) {
  const Segment* s = find(id);
  if (s == nullptr || s->complete) return "";
  std::vector<std::string> files = remove_if_dropped({id});
  return files.empty() ? "" : files.front();
}

std::vector<std::string> SnapshotShelf::abandon_writing() {
  std::vector<uint64_t> ids;
  for (const Segment& s : segments_) {
    if (!s.complete) ids.push_back(s.id);
  }
  return remove_if_dropped(ids);
}

std::vector<std::string> SnapshotShelf::drop_after(int64_t step) {
  std::vector<uint64_t> ids;
  for (const Segment& s : segments_) {
    if (s.step > step) ids.push_back(s.id);
  }
  return remove_if_dropped(ids);
}

std::vector<std::string> SnapshotShelf::persisted(int rank, int64_t step, const std::string& path) {
  for (Segment& s : segments_) {
    if (s.rank == rank && s.step == step && s.complete) s.persisted = true;
  }
  if (rank < 0 || rank >= nproc_) return {};
  std::deque<StoredFile>& files = stored_[static_cast<size_t>(rank)];
  // The same path written again holds the new step now: it is not an older file to delete.
  std::erase_if(files, [&](const StoredFile& f) { return f.path == path; });
  files.push_back(StoredFile{step, path});
  std::vector<std::string> deleted;
  while (keep_ > 0 && files.size() > static_cast<size_t>(keep_)) {
    deleted.push_back(files.front().path);
    files.pop_front();
  }
  while (files.size() > kMaxStoredFiles) files.pop_front();
  return deleted;
}

rdzv::RankSnapshot SnapshotShelf::note(int rank) const {
  rdzv::RankSnapshot out;
  const std::vector<int64_t> memory = memory_steps(rank);
  if (!memory.empty()) out.memory = memory.back();
  const std::deque<StoredFile>& files = stored_[static_cast<size_t>(rank)];
  if (!files.empty()) out.stored = files.back().step;
  return out;
}

std::vector<int64_t> SnapshotShelf::memory_steps(int rank) const {
  std::vector<int64_t> steps;
  for (const Segment& s : segments_) {
    if (s.rank == rank && s.complete) steps.push_back(s.step);
  }
  std::sort(steps.begin(), steps.end());
  return steps;
}

std::vector<int64_t> SnapshotShelf::stored_steps(int rank) const {
  std::vector<int64_t> steps;
  const std::deque<StoredFile>& files = stored_[static_cast<size_t>(rank)];
  for (auto it = files.rbegin(); it != files.rend() && steps.size() < rdzv::kMaxHeldSteps; ++it)
    steps.push_back(it->step);
  std::sort(steps.begin(), steps.end());
  return steps;
}

std::optional<rdzv::HeldSnapshots> SnapshotShelf::held(int rank_offset, int world_size) const {
  rdzv::HeldSnapshots out;
  out.world_size = world_size;
  bool any = false;
  for (int rank = 0; rank < nproc_; ++rank) {
    std::vector<int64_t> memory = memory_steps(rank);
    std::vector<int64_t> stored = stored_steps(rank);
    any = any || !memory.empty() || !stored.empty();
    const int global = rank_offset + rank;
    if (!out.ranges.empty() && out.ranges.back().memory == memory &&
        out.ranges.back().stored == stored) {
      out.ranges.back().last_rank = global;
    } else {
      out.ranges.push_back(
          rdzv::SnapshotRange{global, global, std::move(memory), std::move(stored)});
    }
  }
  if (!any) return std::nullopt;
  return out;
}

}  // namespace npu_run
