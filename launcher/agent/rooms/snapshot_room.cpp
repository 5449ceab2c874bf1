// The snapshots' room (issue 47): every worker gets NPU_RUN_CHECKPOINT, the node's snapshot socket
// in the agent's private directory, and python/npu_run_checkpoint.py on its PYTHONPATH (written
// beside the sitecustomize). The segments are files of the agent's in /dev/shm
// (workers/snapshot_segments.hpp): a worker that dies leaves its rank's last snapshot intact, and
// the next round loads the step the rendezvous chose from every agent's join
// (rendezvous/state/restore_choice.hpp). What a save begins and ends, and the writes to storage,
// are the desk's (agent/snapshots/snapshot_desk.hpp); the room keeps the segments for the agent's
// life, tells the desk where the rounds are, and ends only once every write to storage has.
#include <spdlog/spdlog.h>

#include <filesystem>
#include <fstream>

#include "agent/link/rendezvous_settings.hpp"
#include "agent/rooms/agent_rooms.hpp"
#include "agent/rooms/checkpoint_module_source.hpp"
#include "agent/snapshots/copy_stream.hpp"
#include "agent/snapshots/snapshot_desk.hpp"
#include "net/line_socket.hpp"
#include "workers/escaped_processes.hpp"
#include "workers/progress_beats.hpp"
#include "workers/snapshot_segments.hpp"

namespace npu_run {
namespace {

constexpr size_t kMaxLine = 16384;  // a request: a path and a few numbers

uint64_t snapshot_budget(const SnapshotConfig& cfg, const std::string& directory) {
  const uint64_t wanted =
      cfg.bytes ? *cfg.bytes
                : static_cast<uint64_t>(static_cast<double>(memory_available()) * cfg.share);
  return std::min(wanted, free_bytes_under(directory));
}

// <agent directory>/python/npu_run_checkpoint.py; throws when it cannot be written.
void write_module(const std::string& agent_directory) {
  const std::string directory = agent_directory + "/python";
  std::filesystem::create_directories(directory);
  std::ofstream out(directory + "/npu_run_checkpoint.py", std::ios::trunc);
  out << kCheckpointModule;
  out.close();
  if (!out) throw std::runtime_error("cannot write " + directory + "/npu_run_checkpoint.py");
}

// The ring of copies needs other nodes; its key comes from the job's token
// (agent/snapshots/copy_stream.hpp).
std::optional<SnapshotDesk::CopySettings> copy_settings(const LaunchConfig& cfg) {
  if (!cfg.shape.multi_node()) return std::nullopt;
  return SnapshotDesk::CopySettings{copy_key(token_value(cfg.rendezvous.token)),
                                    cfg.rendezvous.run_id};
}

std::string socket_path(const std::string& agent_directory) {
  return agent_directory + "/snapshots";
}

class SnapshotRoom final : public AgentRoom {
 public:
  SnapshotRoom(const RoomContext& ctx, std::shared_ptr<SnapshotNotes> notes) : beats_(ctx.beats) {
    if (ctx.beats == nullptr) return;
    try {
      directory_ = make_segment_directory(agent_mark());
      const uint64_t budget = snapshot_budget(ctx.cfg.snapshots, directory_);
      desk_ = std::make_unique<SnapshotDesk>(ctx.io, directory_, ctx.cfg.shape.nproc_per_node,
                                             budget, ctx.cfg.snapshots.keep, std::move(notes),
                                             copy_settings(ctx.cfg));
      agent_directory_ = ctx.beats->directory();
      socket_ = std::make_unique<net::LineSocket>(
          ctx.io, socket_path(agent_directory_),
          [desk = desk_.get()](uint64_t id, const std::string& line) {
            return desk->answer(id, line);
          },
          [desk = desk_.get()](uint64_t id) { desk->closed(id); },
          4 * static_cast<size_t>(ctx.cfg.shape.nproc_per_node) + 8, kMaxLine);
      desk_->set_reply([socket = socket_.get()](uint64_t id, const std::string& line) {
        socket->reply(id, line);
      });
      write_module(agent_directory_);
      spdlog::debug("snapshots in memory: up to {} in {}", size_text(budget), directory_);
    } catch (const std::exception& e) {
      spdlog::warn("{}; npu_run_checkpoint saves go to storage directly", e.what());
      socket_.reset();
      desk_.reset();
    }
  }

  ~SnapshotRoom() override {
    socket_.reset();
    desk_.reset();
    if (!directory_.empty()) remove_segment_directory(directory_);
  }
  SnapshotRoom(const SnapshotRoom&) = delete;
  SnapshotRoom& operator=(const SnapshotRoom&) = delete;

  void listen(Rendezvous::Handlers& handlers, Inbox& /*inbox*/) override {
    handlers.snapshots = [this]() -> std::optional<rdzv::HeldSnapshots> {
      if (!desk_) return std::nullopt;
      return desk_->held();
    };
  }

  void assigned(const Assignment& assignment) override {
    if (desk_) {
      desk_->assigned(assignment.rank_offset, assignment.world_size, assignment.restore,
                      assignment.copy_to);
    }
  }

  void starting(std::vector<WorkerSpec>& specs) override {
    if (desk_) give_snapshot_env(specs, agent_directory_);
  }

  void done(GroupEnd& /*end*/, Attempt& /*attempt*/) override {
    if (!desk_) return;
    desk_->workers_done();
    desk_->round_reached(reached());
  }

  // NOLINTNEXTLINE(performance-unnecessary-value-param): kept until the writes end
  void finishing(std::function<void()> done) override {
    if (!desk_ || desk_->writes_outstanding() == 0) return done();
    spdlog::info("writing {} snapshot(s) to storage before npu_run ends",
                 desk_->writes_outstanding());
    desk_->when_written(std::move(done));
  }

 private:
  // The step the round's ranks reached: the number in a script's own beats, or the optimizer
  // steps the automatic beats counted on top of the step the round loaded.
  std::optional<int64_t> reached() const {
    if (beats_ == nullptr) return std::nullopt;
    std::optional<int64_t> step;
    for (int r = 0; r < beats_->local_ranks(); ++r) {
      const RankProgress& p = beats_->rank(r);
      if (p.beats == 0) continue;
      const int64_t v = progress_value(p) + (p.beats_itself ? 0 : desk_->loaded_step());
      step = std::max(step.value_or(v), v);
    }
    return step;
  }

  const ProgressBeats* beats_ = nullptr;
  std::string directory_;  // the segments'
  std::unique_ptr<SnapshotDesk> desk_;
  std::string agent_directory_;  // the socket's and the module's
  std::unique_ptr<net::LineSocket> socket_;
};

}  // namespace

void give_snapshot_env(std::vector<WorkerSpec>& specs, const std::string& agent_directory) {
  const std::string module_directory = agent_directory + "/python";  // write_module()'s
  for (WorkerSpec& spec : specs) {
    set_contract_env(spec, "NPU_RUN_CHECKPOINT", socket_path(agent_directory));
    const auto user = spec.env.find("PYTHONPATH");
    const std::string path = user == spec.env.end() ? "" : user->second;
    if (path == module_directory || path.rfind(module_directory + ":", 0) == 0) continue;
    set_contract_env(spec, "PYTHONPATH",
                     path.empty() ? module_directory : module_directory + ":" + path);
  }
}

std::unique_ptr<AgentRoom> snapshot_room(const RoomContext& ctx,
                                         std::shared_ptr<SnapshotNotes> notes) {
  return std::make_unique<SnapshotRoom>(ctx, std::move(notes));
}

}  // namespace npu_run
