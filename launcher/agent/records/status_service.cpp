#include "agent/records/status_service.hpp"

#include <spdlog/spdlog.h>

#include "agent/round/rank_beats.hpp"
#include "agent/snapshots/snapshot_notes.hpp"
#include "net/answer_socket.hpp"
#include "rendezvous/protocol/protocol.hpp"
#include "workers/agent_directory.hpp"
#include "workers/progress_beats.hpp"

namespace npu_run {
namespace {

std::string frame_of(const rdzv::ServerMessage& message) {
  return rdzv::encode_frame(rdzv::encode(message));
}

}  // namespace

StatusService::StatusService(boost::asio::io_context& io, Rendezvous& rendezvous,
                             const ProgressBeats& beats, SeatSource seat,
                             std::shared_ptr<const SnapshotNotes> snapshots)
    : rendezvous_(rendezvous),
      beats_(beats),
      seat_(std::move(seat)),
      snapshots_(std::move(snapshots)) {
  socket_ = open(io, kStatusSocketName, Rendezvous::StatusAsk::kStatus);
  dump_socket_ = open(io, kDumpSocketName, Rendezvous::StatusAsk::kDump);
}

std::unique_ptr<net::AnswerSocket> StatusService::open(boost::asio::io_context& io,
                                                       const char* name,
                                                       Rendezvous::StatusAsk ask) {
  const std::string path = beats_.directory() + "/" + name;
  try {
    return std::make_unique<net::AnswerSocket>(
        io, path, [this, ask](const net::AnswerSocket::Reply& reply) { answer(ask, reply); },
        kTimeout,
        frame_of(rdzv::ErrorReply{"no_answer",
                                  fmt::format("the rendezvous at {} did not answer within {} s",
                                              rendezvous_.describe(), kTimeout.count())}));
  } catch (const std::exception& e) {
    spdlog::warn("npu_run status cannot reach this agent: {}", e.what());
    return nullptr;
  }
}

StatusService::~StatusService() = default;

std::optional<std::vector<rdzv::RankBeat>> StatusService::changed_beats() {
  std::vector<uint64_t> counts;
  for (int r = 0; r < beats_.local_ranks(); ++r) counts.push_back(beats_.rank(r).beats);
  const uint64_t snapshot_changes = snapshots_ ? snapshots_->changes : 0;
  if (counts == sent_ && snapshot_changes == snapshot_changes_sent_) return std::nullopt;
  sent_ = std::move(counts);
  snapshot_changes_sent_ = snapshot_changes;
  return ranks_now();
}

std::vector<rdzv::RankBeat> StatusService::ranks_now() const {
  std::vector<rdzv::RankBeat> ranks = rank_beats(beats_, std::chrono::steady_clock::now());
  if (snapshots_) snapshots_->add_to(ranks);
  return ranks;
}

void StatusService::answer(Rendezvous::StatusAsk ask,
                           const std::function<void(std::string)>& reply) {
  rendezvous_.query_status(ask, [this, alive = std::weak_ptr<int>(alive_),
                                 reply](Rendezvous::StatusAnswer answer) {
    if (alive.expired()) return;
    if (const auto* why = std::get_if<std::string>(&answer)) {
      reply(frame_of(rdzv::ErrorReply{"no_status", *why}));
      return;
    }
    rdzv::JobStatus status = std::get<rdzv::JobStatus>(std::move(answer));
    // This node's ranks as of now, fresher than what its heartbeats carried.
    if (const auto seat = seat_()) {
      for (rdzv::NodeStatus& node : status.nodes) {
        if (node.node_rank == seat->node_rank && node.host == seat->host && node.state != "waiting")
          node.ranks = ranks_now();
      }
    }
    reply(frame_of(status));
  });
}

}  // namespace npu_run
