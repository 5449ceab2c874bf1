// The agent's copy port (issue 47, the ring of copies): a TCP listener on every address of the
// node, advertised in its joins, where the previous node's agent in the ring of node ranks puts
// copies of its ranks' snapshots, and where an agent that has a lost seat's ranks to restore gets
// them. Each connection first proves it knows the job's copy key (agent/snapshots/copy_stream.hpp);
// then:
//
//   put {rank, step, world_size, bytes} -> {ok} | {ok:false, error}; on ok, the bytes; -> {ok}
//   get {rank, step}                    -> {ok, bytes} then the bytes | {ok:false, error}
//
// What is kept where, and whether it fits, is the keeper's (agent/snapshots/snapshot_desk.hpp).
// Bounded: at most 16 connections at a time, each cut after a stall; a peer that breaks the
// protocol loses its connection and nothing else.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

namespace boost::asio {
class io_context;
}

namespace npu_run {

class CopyKeeper {
 public:
  struct Slot {  // where a copy goes, or why it does not
    std::string file;
    std::string error;
  };
  struct Source {  // where a snapshot to send is, or why it is not here
    std::string file;
    uint64_t bytes = 0;
    std::string error;
  };
  virtual ~CopyKeeper() = default;
  virtual Slot copy_begins(int rank, int64_t step, uint64_t bytes, int world_size) = 0;
  virtual void copy_ends(const std::string& file, bool whole) = 0;
  // A segment or copy asked for: kept (not reused for another save) until copy_served.
  virtual Source copy_wanted(int rank, int64_t step) = 0;
  virtual void copy_served(const std::string& file) = 0;
};

class SnapshotCopyServer {
 public:
  // Listens on a port the kernel picks, on IPv6's any address (IPv4 too) or, without IPv6,
  // IPv4's; throws std::runtime_error naming why it cannot.
  SnapshotCopyServer(boost::asio::io_context& io, CopyKeeper& keeper, std::string key,
                     std::string run_id);
  ~SnapshotCopyServer();  // closes every connection; the keeper hears the ends of unfinished ones
  SnapshotCopyServer(const SnapshotCopyServer&) = delete;
  SnapshotCopyServer& operator=(const SnapshotCopyServer&) = delete;

  int port() const;

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;
};

}  // namespace npu_run
