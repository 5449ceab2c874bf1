#include "rendezvous/state/restore_choice.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <optional>
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

const std::vector<int64_t>& memory_of(const SnapshotRange& r) {
  return r.memory;
}
const std::vector<int64_t>& stored_of(const SnapshotRange& r) {
  return r.stored;
}

// Every step some range (or copy) holds, newest first.
std::vector<int64_t> candidates(const std::vector<SeatHolding>& seats, const StepsOf& steps_of) {
  std::set<int64_t, std::greater<>> steps;
  for (const SeatHolding& seat : seats) {
    if (seat.held == nullptr) continue;
    for (const auto* list : {&seat.held->ranges, &seat.held->copies}) {
      for (const SnapshotRange& range : *list)
        steps.insert(steps_of(range).begin(), steps_of(range).end());
    }
  }
  return {steps.begin(), steps.end()};
}

bool contains(const std::vector<int64_t>& steps, int64_t step) {
  return std::find(steps.begin(), steps.end(), step) != steps.end();
}

bool same_world(const SeatHolding& seat, int world_size) {
  return seat.held != nullptr && seat.held->world_size == world_size;
}

// The newest step every rank of a world of `world_size` has on storage, or -1: anyone's files
// serve any rank (the job's shared storage).
int64_t stored_step(const std::vector<SeatHolding>& seats, int world_size) {
  for (const int64_t step : candidates(seats, stored_of)) {
    std::vector<Interval> held;
    for (const SeatHolding& seat : seats) {
      if (!same_world(seat, world_size)) continue;
      for (const SnapshotRange& range : seat.held->ranges) {
        if (contains(range.stored, step)) held.emplace_back(range.first_rank, range.last_rank);
      }
    }
    if (covers(std::move(held), world_size)) return step;
  }
  return -1;
}

// The parts of [lo, hi] that `own` leaves uncovered.
std::vector<Interval> gaps(int64_t lo, int64_t hi, std::vector<Interval> own) {
  std::sort(own.begin(), own.end());
  std::vector<Interval> out;
  int64_t next = lo;
  for (const auto& [first, last] : own) {
    if (first > next) out.emplace_back(next, std::min(hi, first - 1));
    next = std::max(next, last + 1);
    if (next > hi) break;
  }
  if (next <= hi) out.emplace_back(next, hi);
  return out;
}

// Ranks `gap` from the copies other seats hold of `step` (each piece from the copy reaching
// furthest), or nullopt when some rank of it has none.
std::optional<std::vector<RestoreFetch>> from_copies(const std::vector<SeatHolding>& seats,
                                                     int world_size, int64_t step, Interval gap) {
  std::vector<RestoreFetch> out;
  int64_t next = gap.first;
  while (next <= gap.second) {
    const SeatHolding* best = nullptr;
    int64_t reach = next - 1;
    for (const SeatHolding& seat : seats) {
      if (!same_world(seat, world_size) || seat.held->copy_port == 0) continue;
      for (const SnapshotRange& copy : seat.held->copies) {
        if (copy.first_rank <= next && copy.last_rank > reach && contains(copy.memory, step)) {
          best = &seat;
          reach = copy.last_rank;
        }
      }
    }
    if (best == nullptr) return std::nullopt;
    const int64_t last = std::min(reach, gap.second);
    out.push_back(RestoreFetch{static_cast<int>(next), static_cast<int>(last),
                               CopyPeer{best->host, best->addr, best->held->copy_port}});
    next = last + 1;
  }
  return out;
}

// Appends `piece`, joined to the last one when it continues it from the same agent.
void add_piece(std::vector<RestoreFetch>& pieces, RestoreFetch piece) {
  if (!pieces.empty()) {
    RestoreFetch& last = pieces.back();
    if (last.last_rank + 1 == piece.first_rank && last.from.addr == piece.from.addr &&
        last.from.port == piece.from.port) {
      last.last_rank = piece.last_rank;
      return;
    }
  }
  pieces.push_back(std::move(piece));
}

// Whether every rank holds `step` in its seat's agent's memory or in a copy; by seat, what to
// fetch. Its own memory first: a copy only for what the seat's agent lacks.
std::optional<std::vector<std::vector<RestoreFetch>>> in_memory(
    const std::vector<SeatHolding>& seats, int world_size, int64_t step) {
  std::vector<std::vector<RestoreFetch>> fetch(seats.size());
  for (size_t i = 0; i < seats.size(); ++i) {
    const SeatHolding& seat = seats[i];
    const int64_t lo = seat.rank_offset;
    const int64_t hi = lo + seat.nproc - 1;
    std::vector<Interval> own;
    if (same_world(seat, world_size)) {
      for (const SnapshotRange& range : seat.held->ranges) {
        if (!contains(range.memory, step)) continue;
        const int64_t first = std::max<int64_t>(lo, range.first_rank);
        const int64_t last = std::min<int64_t>(hi, range.last_rank);
        if (first <= last) own.emplace_back(first, last);
      }
    }
    for (const Interval& gap : gaps(lo, hi, std::move(own))) {
      auto copied = from_copies(seats, world_size, step, gap);
      if (!copied) return std::nullopt;
      for (RestoreFetch& piece : *copied) add_piece(fetch[i], std::move(piece));
    }
  }
  return fetch;
}

// The world the snapshots were taken in: the first seat's that holds any.
int snapshot_world(const std::vector<SeatHolding>& seats) {
  for (const SeatHolding& seat : seats) {
    if (seat.held != nullptr && (!seat.held->ranges.empty() || !seat.held->copies.empty()))
      return seat.held->world_size;
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
      return fmt::format(
          "{} (node {}) holds no snapshot of ranks {}-{} in memory, and no agent of the round a "
          "copy of one step every rank has",
          seat.host, seat.node_rank, seat.rank_offset, seat.rank_offset + seat.nproc - 1);
    }
  }
  return "no one step is held in memory by every rank";
}

std::string memory_why(int64_t step, const std::vector<std::vector<RestoreFetch>>& fetch) {
  size_t copied = 0;
  for (const auto& seat : fetch) {
    for (const RestoreFetch& f : seat)
      copied += static_cast<size_t>(f.last_rank - f.first_rank + 1);
  }
  if (copied == 0) return fmt::format("every rank holds step {} in memory", step);
  return fmt::format("every rank holds step {} in memory, {} of them as a copy on another node",
                     step, copied);
}

}  // namespace

RestoreChoice choose_restore(const std::vector<SeatHolding>& seats, int world_size) {
  RestoreChoice choice;
  choice.fetch.resize(seats.size());
  const int taken_in = snapshot_world(seats);
  if (taken_in == 0) return choice;  // nothing was ever saved through npu_run
  if (taken_in == world_size) {
    for (const int64_t step : candidates(seats, memory_of)) {
      auto fetch = in_memory(seats, world_size, step);
      if (!fetch) continue;
      choice.point = {RestoreSource::kMemory, step, memory_why(step, *fetch)};
      choice.fetch = std::move(*fetch);
      return choice;
    }
  }
  const std::string why = why_not_memory(seats, world_size, taken_in);
  if (const int64_t step = stored_step(seats, taken_in); step >= 0) {
    choice.point = {RestoreSource::kStorage, step,
                    fmt::format("{}; every rank's step {} is on storage", why, step)};
    return choice;
  }
  choice.point = {RestoreSource::kNone, -1,
                  fmt::format("{}, and no one step was written to storage for every rank", why)};
  return choice;
}

}  // namespace npu_run::rdzv
