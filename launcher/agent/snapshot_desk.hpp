// The agent's side of npu_run_checkpoint's conversation (python/npu_run_checkpoint.py), one JSON
// line asked and one answered on the node's snapshot socket (agent/snapshot_room.cpp):
//
//   begin    {rank, step, bytes}  -> {ok, file}: a segment reserved, to torch.save into; or why not
//   commit   {path}               -> {ok}: complete; written to `path` in the background
//   abort    {}                   -> {ok}: the segment could not be written; it is dropped
//   restore  {rank}               -> {source, step, file | why}: what this round loads
//   restored {rank, source, step, seconds} -> {ok}: how long the load took
//
// A conversation that ends between begin and commit (its worker died in the middle of a save)
// drops its segment, so the rank's last complete one stays what it holds.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "agent/snapshot_notes.hpp"
#include "agent/snapshot_shelf.hpp"
#include "agent/snapshot_writer.hpp"
#include "rendezvous/snapshot_messages.hpp"

namespace boost::asio {
class io_context;
}

namespace npu_run {

class SnapshotDesk {
 public:
  // `directory`: where the segments are (workers/snapshot_segments.hpp), made already.
  // `notes`: where `npu_run status` reads each rank's snapshots, kept up to date here.
  SnapshotDesk(boost::asio::io_context& io, std::string directory, int nproc, uint64_t budget,
               int keep, std::shared_ptr<SnapshotNotes> notes);
  ~SnapshotDesk();
  SnapshotDesk(const SnapshotDesk&) = delete;
  SnapshotDesk& operator=(const SnapshotDesk&) = delete;

  std::string answer(uint64_t conversation, const std::string& line);
  void closed(uint64_t conversation);
  // The round's workers are gone: saves they left unfinished are dropped.
  void workers_done();
  // This round restores `point`: segments of later steps are dropped (their future is redone).
  void restore(const rdzv::RestorePoint& point);
  // The step this round's ranks loaded (0 before any): what automatic beats count from.
  int64_t loaded_step() const { return std::max<int64_t>(loaded_step_, 0); }
  // The round that ended reached `step` (from its ranks' beats): the next restore says how many
  // steps it costs.
  void round_reached(std::optional<int64_t> step) { reached_ = step; }
  std::optional<rdzv::HeldSnapshots> held(int rank_offset, int world_size) const {
    return shelf_.held(rank_offset, world_size);
  }
  // Runs `done` once every write to storage has ended.
  void when_written(std::function<void()> done) { writer_->when_drained(std::move(done)); }
  size_t writes_outstanding() const { return writer_->outstanding(); }
  const SnapshotShelf& shelf() const { return shelf_; }
  const std::string& directory() const { return directory_; }

 private:
  using json = nlohmann::json;
  json on_begin(uint64_t conversation, const json& request);
  json on_commit(uint64_t conversation, const json& request);
  json on_restore(const json& request) const;
  json on_restored(const json& request);
  void restored_all();
  void written(const SnapshotWritten& written);
  void remove_segments(const std::vector<std::string>& names) const;
  std::string file_of(const std::string& name) const { return directory_ + "/" + name; }
  void note(int rank);

  std::string directory_;
  SnapshotShelf shelf_;
  std::shared_ptr<SnapshotNotes> notes_;
  std::vector<int> to_write_;  // by local rank: writes waiting or in progress
  rdzv::RestorePoint restore_;
  std::map<uint64_t, uint64_t> writing_;  // conversation -> the segment it began
  int restored_ranks_ = 0;                // this round, for one line once all are in
  double slowest_restore_ = 0;
  int64_t loaded_step_ = -1;  // what this round's ranks said they loaded
  std::string loaded_from_;
  std::optional<int64_t> reached_;          // by the round before
  std::unique_ptr<SnapshotWriter> writer_;  // last: its thread ends before the rest goes
};

}  // namespace npu_run
