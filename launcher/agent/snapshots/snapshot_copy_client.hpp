// The agent's side of other agents' copy ports (agent/snapshots/snapshot_copy_server.hpp): it puts
// copies of its ranks' snapshots on the next node's agent in the ring, one at a time in the
// background, the newest of each rank superseding one still waiting; and it fetches the copies a
// round restores that its own memory lacks. Each connection proves the job's copy key first and
// checks the other end's proof (agent/snapshots/copy_stream.hpp), so a stranger on the port gets
// nothing and gives nothing.
//
// No callback runs after the client is gone.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "rendezvous/protocol/snapshot_messages.hpp"

namespace boost::asio {
class io_context;
}

namespace npu_run {

class SnapshotCopyClient {
 public:
  struct Copy {
    int rank = 0;  // global
    int64_t step = 0;
    int world_size = 0;
    std::string file;  // the segment, kept unchanged by the caller until `sent` hears of it
    uint64_t bytes = 0;
  };
  // Once for each copy(): "" when the next agent holds it, else why not ("superseded" for one a
  // newer snapshot of its rank replaced before it was sent).
  using Sent = std::function<void(const Copy& copy, const std::string& error)>;
  using Fetched = std::function<void(const std::string& error, uint64_t bytes)>;

  SnapshotCopyClient(boost::asio::io_context& io, std::string key, std::string run_id, Sent sent);
  ~SnapshotCopyClient();
  SnapshotCopyClient(const SnapshotCopyClient&) = delete;
  SnapshotCopyClient& operator=(const SnapshotCopyClient&) = delete;

  // Where copies go from now on (port 0: nowhere; waiting copies are let go).
  void send_to(const rdzv::CopyPeer& peer);
  void copy(Copy copy);
  // Rank's step from `from`'s copy port into `file` (made here), at most `max_bytes`.
  void fetch(const rdzv::CopyPeer& from, int rank, int64_t step, uint64_t max_bytes,
             const std::string& file, Fetched done);

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;
};

}  // namespace npu_run
