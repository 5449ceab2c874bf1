// The agent's side of npu_run_checkpoint's conversation (python/npu_run_checkpoint.py), one JSON
// line asked and one answered on the node's snapshot socket (agent/rooms/snapshot_room.cpp):
//
//   begin    {rank, step, bytes}  -> {ok, file}: a segment reserved, to torch.save into; or why not
//   commit   {path}               -> {ok}: complete; written to `path` in the background
//   abort    {}                   -> {ok}: the segment could not be written; it is dropped
//   restore  {rank}               -> {source, step, file | why}: what this round loads
//   restored {rank, source, step, seconds} -> {ok}: how long the load took
//
// A conversation that ends between begin and commit (its worker died in the middle of a save)
// drops its segment, so the rank's last complete one stays what it holds.
//
// With several nodes the desk also keeps the ring of copies
// (agent/snapshots/snapshot_desk_copies.cpp): each complete snapshot goes to the next node's agent,
// other nodes' copies are kept here within the same budget (the node's own snapshots first: copies
// make room for them), and a round that restores ranks this agent lacks fetches them first, the
// ranks' restore answers waiting for it.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "agent/snapshots/copy_ledger.hpp"
#include "agent/snapshots/snapshot_copy_client.hpp"
#include "agent/snapshots/snapshot_copy_server.hpp"
#include "agent/snapshots/snapshot_notes.hpp"
#include "agent/snapshots/snapshot_shelf.hpp"
#include "agent/snapshots/snapshot_writer.hpp"
#include "rendezvous/protocol/snapshot_messages.hpp"

namespace boost::asio {
class io_context;
}

namespace npu_run {

class SnapshotDesk final : public CopyKeeper {
 public:
  // The job's copy key (agent/snapshots/copy_stream.hpp) and run id, for the copy port and the
  // ring.
  struct CopySettings {
    std::string key;
    std::string run_id;
  };
  // `directory`: where the segments are (workers/snapshot_segments.hpp), made already.
  // `notes`: where `npu_run status` reads each rank's snapshots, kept up to date here.
  // `copies`: none for a job of one node (no ring); otherwise the copy port opens here (when it
  // cannot, a warning, and the node's own snapshots work without copies).
  SnapshotDesk(boost::asio::io_context& io, std::string directory, int nproc, uint64_t budget,
               int keep, std::shared_ptr<SnapshotNotes> notes,
               std::optional<CopySettings> copies = std::nullopt);
  ~SnapshotDesk() override;
  SnapshotDesk(const SnapshotDesk&) = delete;
  SnapshotDesk& operator=(const SnapshotDesk&) = delete;

  // nullopt: a restore that waits for its rank's fetch; the answer goes through `reply`.
  std::optional<std::string> answer(uint64_t conversation, const std::string& line);
  void set_reply(std::function<void(uint64_t, const std::string&)> reply) {
    reply_ = std::move(reply);
  }
  void closed(uint64_t conversation);
  // The round's workers are gone: saves they left unfinished are dropped.
  void workers_done();
  // This round restores `point`: segments of later steps are dropped (their future is redone),
  // and the ranks it names to fetch are fetched; copies go to `copy_to` from now on.
  void assigned(int rank_offset, int world_size, const rdzv::RestorePoint& point,
                const rdzv::CopyPeer& copy_to);
  // The step this round's ranks loaded (0 before any): what automatic beats count from.
  int64_t loaded_step() const { return std::max<int64_t>(loaded_step_, 0); }
  // The round that ended reached `step` (from its ranks' beats): the next restore says how many
  // steps it costs.
  void round_reached(std::optional<int64_t> step) { reached_ = step; }
  // What a join says: the node's own snapshots (ranks from the last round's offset) and the
  // copies it keeps; none before anything is held and without a copy port.
  std::optional<rdzv::HeldSnapshots> held() const;
  int copy_port() const { return copy_server_ ? copy_server_->port() : 0; }
  // Runs `done` once every write to storage has ended.
  void when_written(std::function<void()> done) { writer_->when_drained(std::move(done)); }
  size_t writes_outstanding() const { return writer_->outstanding(); }
  const SnapshotShelf& shelf() const { return shelf_; }
  const CopyLedger& copies() const { return copies_; }
  const std::string& directory() const { return directory_; }

  // The copy port's keeper (agent/snapshots/snapshot_copy_server.hpp).
  Slot copy_begins(int rank, int64_t step, uint64_t bytes, int world_size) override;
  void copy_ends(const std::string& file, bool whole) override;
  Source copy_wanted(int rank, int64_t step) override;
  void copy_served(const std::string& file) override;

 private:
  using json = nlohmann::json;
  struct Fetching {  // a local rank's fetch of the round's step
    bool pending = false;
    std::string failed;             // why it failed: the rank loads the step from storage
    std::vector<uint64_t> waiting;  // restore conversations answered when it ends
    std::chrono::steady_clock::time_point began{};
  };
  json on_begin(uint64_t conversation, const json& request);
  json on_commit(uint64_t conversation, const json& request);
  std::optional<json> on_restore(uint64_t conversation, const json& request);
  json restore_answer(int rank) const;
  json on_restored(const json& request);
  void restore(const rdzv::RestorePoint& point);
  void copy_out(const Segment& done);
  void copy_sent(const SnapshotCopyClient::Copy& copy, const std::string& error);
  void start_fetches(const rdzv::RestorePoint& point);
  void fetch_one(const rdzv::CopyPeer& from, int rank);
  void fetched(int rank, uint64_t id, const std::string& error, uint64_t bytes);
  bool make_room(uint64_t bytes);
  void lent_changed() { shelf_.lend(copies_.used()); }
  void pin(const std::string& file) { ++pinned_[file]; }
  void unpin(const std::string& file);
  bool pinned(const std::string& name) const { return pinned_.count(file_of(name)) != 0; }
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
  int fetched_ranks_ = 0;  // this round, from other nodes' copies
  double slowest_fetch_ = 0;
  int64_t loaded_step_ = -1;  // what this round's ranks said they loaded
  std::string loaded_from_;
  std::optional<int64_t> reached_;  // by the round before
  int rank_offset_ = 0;
  int world_size_ = 0;  // of the last round assigned; 0 before the first
  CopyLedger copies_;
  std::map<std::string, int> pinned_;  // segment and copy files being sent: not to be reused
  std::vector<Fetching> fetching_;     // by local rank
  std::vector<int64_t> copied_;        // by local rank: the newest step the next node holds
  rdzv::CopyPeer copy_to_;
  std::function<void(uint64_t, const std::string&)> reply_;
  std::unique_ptr<SnapshotCopyServer> copy_server_;
  std::unique_ptr<SnapshotCopyClient> copy_client_;
  std::unique_ptr<SnapshotWriter> writer_;  // last: its thread ends before the rest goes
};

}  // namespace npu_run
