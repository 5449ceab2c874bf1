#include "rendezvous/restore_choice.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <set>
#include <utility>

namespace npu_run::rdzv {
namespace {

using Interval = std::pair<int64_t, int64_t>;  // first and last rank, inclusive

// Whether the intervals together cover 0..world_size-1.
bool covers(std::vector<Interval> parts, int world_size) {
  std::sort(parts.begin(), parts.end());
  int64_t next = 0;  // the first rank not covered yet
  for (const auto& [first, last] : parts) {
    if (first > next) return false;
    next = std::max(next, last + 1);
  }
  return next >= world_size;
}

using StepsOf = std::function<const std::vector<int64_t>&(const SnapshotRange&)>;

// Every step some range holds, newest first.
std::vector<int64_t> candidates(const std::vector<SeatHolding>& seats, const StepsOf& steps_of) {
  std::set<int64_t, std::greater<>> steps;
  for (const SeatHolding& seat : seats) {
    if (seat.held == nullptr) continue;
    for (const SnapshotRange& range : seat.held->ranges)
      steps.insert(steps_of(range).begin(), steps_of(range).end());
  }
  return {steps.begin(), steps.end()};
}

bool contains(const std::vector<int64_t>& steps, int64_t step) {
  return std::find(steps.begin(), steps.end(), step) != steps.end();
}

// The newest step of `steps_of` that every rank of a world of `world_size` has, or -1. Memory
// counts only where the seat's own agent holds the rank (`in_seat`); storage is anyone's to read.
int64_t newest_common(const std::vector<SeatHolding>& seats, int world_size,
                      const StepsOf& steps_of, bool in_seat) {
  for (const int64_t step : candidates(seats, steps_of)) {
    std::vector<Interval> held;
    for (const SeatHolding& seat : seats) {
      if (seat.held == nullptr || seat.held->world_size != world_size) continue;
      const int64_t lo = in_seat ? seat.rank_offset : 0;
      const int64_t hi = in_seat ? int64_t{seat.rank_offset} + seat.nproc - 1 : world_size - 1;
      for (const SnapshotRange& range : seat.held->ranges) {
        if (!contains(steps_of(range), step)) continue;
        const int64_t first = std::max<int64_t>(lo, range.first_rank);
        const int64_t last = std::min<int64_t>(hi, range.last_rank);
        if (first <= last) held.emplace_back(first, last);
      }
    }
    if (covers(std::move(held), world_size)) return step;
  }
  return -1;
}

int64_t memory_step(const std::vector<SeatHolding>& seats, int world_size) {
  return newest_common(
      seats, world_size,
      [](const SnapshotRange& r) -> const std::vector<int64_t>& { return r.memory; }, true);
}

int64_t stored_step(const std::vector<SeatHolding>& seats, int world_size) {
  return newest_common(
      seats, world_size,
      [](const SnapshotRange& r) -> const std::vector<int64_t>& { return r.stored; }, false);
}

// The world the snapshots were taken in: the first seat's that holds any.
int snapshot_world(const std::vector<SeatHolding>& seats) {
  for (const SeatHolding& seat : seats) {
    if (seat.held != nullptr && !seat.held->ranges.empty()) return seat.held->world_size;
  }
  return 0;
}

// Why memory could not serve: the first seat whose agent holds nothing for its ranks, or else
// that no one step is common.
std::string why_not_memory(const std::vector<SeatHolding>& seats, int world_size, int taken_in) {
  if (taken_in != world_size) {
    return fmt::format(
        "the world size changed from {} to {}: the snapshots' ranks are not this "
        "round's (resharding is the framework's)",
        taken_in, world_size);
  }
  for (const SeatHolding& seat : seats) {
    if (seat.held == nullptr || seat.held->ranges.empty()) {
      return fmt::format("{} (node {}) holds no snapshot of ranks {}-{} in memory", seat.host,
                         seat.node_rank, seat.rank_offset, seat.rank_offset + seat.nproc - 1);
    }
  }
  return "no one step is held in memory by every rank";
}

}  // namespace

RestorePoint choose_restore(const std::vector<SeatHolding>& seats, int world_size) {
  const int taken_in = snapshot_world(seats);
  if (taken_in == 0) return {};  // nothing was ever saved through npu_run
  if (const int64_t step = memory_step(seats, world_size); step >= 0)
    return {RestoreSource::kMemory, step, fmt::format("every rank holds step {} in memory", step)};
  const std::string why = why_not_memory(seats, world_size, taken_in);
  if (const int64_t step = stored_step(seats, taken_in); step >= 0) {
    return {RestoreSource::kStorage, step,
            fmt::format("{}; every rank's step {} is on storage", why, step)};
  }
  return {RestoreSource::kNone, -1,
          fmt::format("{}, and no one step was written to storage for every rank", why)};
}

}  // namespace npu_run::rdzv
