// The desk's part in the ring of copies (agent/snapshots/snapshot_desk.hpp): its snapshots sent to
// the next node's agent, the other nodes' copies kept within the node's budget, and the fetches a
// round that restores ranks this agent lacks makes before they load.
#include <fcntl.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agent/snapshots/snapshot_desk.hpp"
#include "workers/snapshot_segments.hpp"

namespace npu_run {

void SnapshotDesk::assigned(int rank_offset, int world_size, const rdzv::RestorePoint& point,
                            const rdzv::CopyPeer& copy_to) {
  // The copies the next node holds are of other ranks, or that node is another one now.
  if (world_size != world_size_ || rank_offset != rank_offset_ || copy_to.addr != copy_to_.addr ||
      copy_to.port != copy_to_.port)
    std::fill(copied_.begin(), copied_.end(), -1);
  copy_to_ = copy_to;
  rank_offset_ = rank_offset;
  world_size_ = world_size;
  remove_segments(copies_.drop_unless_world(world_size));
  if (point.source == rdzv::RestoreSource::kMemory) remove_segments(copies_.drop_after(point.step));
  lent_changed();
  restore(point);
  if (copy_client_) copy_client_->send_to(copy_to);
  start_fetches(point);
}

std::optional<rdzv::HeldSnapshots> SnapshotDesk::held() const {
  std::optional<rdzv::HeldSnapshots> out =
      world_size_ > 0 ? shelf_.held(rank_offset_, world_size_) : std::nullopt;
  if (!copy_server_) return out;
  if (!out) out = rdzv::HeldSnapshots{std::max(world_size_, 1), {}};
  out->copy_port = copy_server_->port();
  if (copies_.world_size() == out->world_size)
    out->copies = copies_.ranges(rdzv::Limits::kMaxWorkersPerNode);
  return out;
}

void SnapshotDesk::copy_out(const Segment& done) {
  if (!copy_client_ || world_size_ == 0) return;
  const std::string file = file_of(done.name);
  pin(file);
  copy_client_->copy(
      SnapshotCopyClient::Copy{rank_offset_ + done.rank, done.step, world_size_, file, done.bytes});
}

void SnapshotDesk::copy_sent(const SnapshotCopyClient::Copy& copy, const std::string& error) {
  unpin(copy.file);
  const int rank = copy.rank - rank_offset_;
  if (rank < 0 || rank >= shelf_.nproc()) return;  // of a round before
  if (error.empty()) {
    copied_[static_cast<size_t>(rank)] = std::max(copied_[static_cast<size_t>(rank)], copy.step);
    note(rank);
  }
}

void SnapshotDesk::unpin(const std::string& file) {
  const auto it = pinned_.find(file);
  if (it != pinned_.end() && --it->second == 0) pinned_.erase(it);
}

// Drops the copies of the oldest step this node keeps for others; false when it keeps none.
bool SnapshotDesk::make_room(uint64_t /*bytes*/) {
  const std::vector<std::string> dropped = copies_.drop_oldest();
  if (dropped.empty()) return false;
  spdlog::info("dropping {} copies of other nodes' snapshots to make room for this node's own",
               dropped.size());
  remove_segments(dropped);
  lent_changed();
  return true;
}

CopyKeeper::Slot SnapshotDesk::copy_begins(int rank, int64_t step, uint64_t bytes, int world_size) {
  if (world_size_ != 0 && world_size != world_size_)
    return {"", fmt::format("this round's world is {} ranks, not {}", world_size_, world_size)};
  if (bytes > shelf_.room() || bytes > free_bytes_under(directory_)) {
    return {"", fmt::format("{} of {} has {} free for copies of {} (--checkpoint-memory)",
                            size_text(bytes), directory_, size_text(shelf_.room()),
                            size_text(shelf_.budget()))};
  }
  CopyLedger::Begun begun = copies_.begin(rank, step, bytes, world_size);
  remove_segments(begun.dropped);
  lent_changed();
  return {file_of(begun.name), ""};
}

void SnapshotDesk::copy_ends(const std::string& file, bool whole) {
  const std::string name = file.substr(directory_.size() + 1);
  if (whole) {
    remove_segments(copies_.complete(name));
  } else {
    remove_segments({copies_.abandon(name)});
  }
  lent_changed();
}

CopyKeeper::Source SnapshotDesk::copy_wanted(int rank, int64_t step) {
  std::string name;
  uint64_t bytes = 0;
  if (const HeldCopy* copy = copies_.find(rank, step)) {
    name = copy->name;
    bytes = copy->bytes;
  } else if (const Segment* own = shelf_.complete(rank - rank_offset_, step);
             own != nullptr && world_size_ > 0 && rank >= rank_offset_) {
    name = own->name;
    bytes = own->bytes;
  } else {
    return {"", 0, fmt::format("no snapshot of rank {} at step {} is held here", rank, step)};
  }
  pin(file_of(name));
  return {file_of(name), bytes, ""};
}

void SnapshotDesk::copy_served(const std::string& file) {
  unpin(file);
}

void SnapshotDesk::start_fetches(const rdzv::RestorePoint& point) {
  for (Fetching& f : fetching_) f = Fetching{};
  if (point.source != rdzv::RestoreSource::kMemory) return;
  for (const rdzv::RestoreFetch& piece : point.fetch) {
    for (int global = piece.first_rank; global <= piece.last_rank; ++global) {
      const int rank = global - rank_offset_;
      if (rank >= 0 && rank < shelf_.nproc()) fetch_one(piece.from, rank);
    }
  }
}

void SnapshotDesk::fetch_one(const rdzv::CopyPeer& from, int rank) {
  Fetching& state = fetching_[static_cast<size_t>(rank)];
  const auto give_up = [&](const std::string& why) {
    state.failed =
        fmt::format("its step {} could not be fetched from {}: {}", restore_.step, from.host, why);
    spdlog::warn("local rank {}: {}; it loads that step from storage", rank, state.failed);
  };
  if (!copy_client_) return give_up("this agent has no copy port");
  SnapshotShelf::Begun begun = shelf_.begin(rank, restore_.step, 0);
  remove_segments(begun.dropped);
  if (begun.segment == nullptr) return give_up(begun.refusal);
  const uint64_t id = begun.segment->id;
  state.pending = true;
  state.began = std::chrono::steady_clock::now();
  spdlog::info("local rank {} fetches step {} from the copy on {} ({}:{})", rank, restore_.step,
               from.host, from.addr, from.port);
  copy_client_->fetch(from, rank_offset_ + rank, restore_.step,
                      std::min(shelf_.room(), free_bytes_under(directory_)),
                      file_of(begun.segment->name),
                      [this, rank, id](const std::string& error, uint64_t bytes) {
                        fetched(rank, id, error, bytes);
                      });
}

void SnapshotDesk::fetched(int rank, uint64_t id, const std::string& error, uint64_t bytes) {
  Fetching& state = fetching_[static_cast<size_t>(rank)];
  state.pending = false;
  if (error.empty()) {
    SnapshotShelf::Begun committed = shelf_.commit(id, bytes, "");
    remove_segments(committed.dropped);
    if (committed.segment == nullptr) state.failed = committed.refusal;
  } else {
    const std::string name = shelf_.abandon(id);
    if (!name.empty()) remove_segments({name});
    state.failed = error;
  }
  if (!state.failed.empty()) {
    state.failed = fmt::format("its step {} could not be fetched: {}", restore_.step, state.failed);
    spdlog::warn("local rank {}: {}; it loads that step from storage", rank, state.failed);
  } else {
    const std::chrono::duration<double> took = std::chrono::steady_clock::now() - state.began;
    ++fetched_ranks_;
    slowest_fetch_ = std::max(slowest_fetch_, took.count());
    spdlog::info("local rank {} fetched step {} ({}, {:.2f} s)", rank, restore_.step,
                 size_text(bytes), took.count());
  }
  note(rank);
  const std::string answer = restore_answer(rank).dump();
  for (const uint64_t conversation : std::exchange(state.waiting, {})) {
    if (reply_) reply_(conversation, answer);
  }
}

}  // namespace npu_run
