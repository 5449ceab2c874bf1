// `npu_run status` (issue 18): on this host it connects to the agent's status socket, in the
// agent's private directory (this user only), and gets the job as the rendezvous sees it with
// this node's ranks' beats as of now; the other nodes' beats reach the rendezvous with their
// agents' heartbeats, when they changed. `npu_run status --dump` connects to a socket of its own
// beside it, whose answer waits for every running rank's records
// (agent/rooms/records_dump_room.cpp).
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "agent/link/rendezvous.hpp"
#include "rendezvous/protocol/messages.hpp"

namespace boost::asio {
class io_context;
}

namespace npu_run {

class ProgressBeats;
struct SnapshotNotes;
namespace net {
class AnswerSocket;
}

class StatusService {
 public:
  // This agent's node in the running round (its ranks are overlaid in the answer); none while
  // it has no seat.
  struct Seat {
    int node_rank = 0;
    std::string host;
  };
  using SeatSource = std::function<std::optional<Seat>()>;

  // Listens on `kStatusSocketName` and `kDumpSocketName` in the beats' directory; a socket that
  // cannot be made is logged, and status is then answered elsewhere only.
  // `snapshots`: each rank's npu_run_checkpoint snapshots, shown with its beats.
  StatusService(boost::asio::io_context& io, Rendezvous& rendezvous, const ProgressBeats& beats,
                SeatSource seat, std::shared_ptr<const SnapshotNotes> snapshots);
  ~StatusService();
  StatusService(const StatusService&) = delete;
  StatusService& operator=(const StatusService&) = delete;

  // For Rendezvous::Handlers::beats: the ranks' beats when any rank beat since the last call.
  std::optional<std::vector<rdzv::RankBeat>> changed_beats();

  // How long an asker waits for the rendezvous' answer.
  static constexpr std::chrono::seconds kTimeout{10};

 private:
  void answer(Rendezvous::StatusAsk ask, const std::function<void(std::string)>& reply);
  std::unique_ptr<net::AnswerSocket> open(boost::asio::io_context& io, const char* name,
                                          Rendezvous::StatusAsk ask);
  std::vector<rdzv::RankBeat> ranks_now() const;

  Rendezvous& rendezvous_;
  const ProgressBeats& beats_;
  SeatSource seat_;
  std::shared_ptr<const SnapshotNotes> snapshots_;
  std::vector<uint64_t> sent_;  // beat counts in the last changed_beats() answer
  uint64_t snapshot_changes_sent_ = 0;
  std::shared_ptr<int> alive_ = std::make_shared<int>(0);  // answers arriving after the end
  std::unique_ptr<net::AnswerSocket> socket_;              // kStatusSocketName
  std::unique_ptr<net::AnswerSocket> dump_socket_;         // kDumpSocketName
};

}  // namespace npu_run
