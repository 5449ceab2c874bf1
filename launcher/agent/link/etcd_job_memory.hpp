// The job's memory (rendezvous/protocol/job_memory.hpp) as an etcd rendezvous keeps it, under
// <prefix>/memory: read once, then followed with a watch, so that whichever agent etcd elects
// next continues the job from it; written by the leader, each write a transaction fenced by the
// leader key's create revision (its epoch), one at a time and the newest last.
#pragma once

#include <boost/asio/io_context.hpp>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "etcd/client.hpp"
#include "etcd/watch.hpp"
#include "rendezvous/protocol/job_memory.hpp"

namespace npu_run {

class EtcdJobMemory {
 public:
  // `key`: the memory's; `leader_key`: the key a write is fenced by; `leading`: whether this
  // agent leads, when its own copy is the newest and the watch does not replace it.
  EtcdJobMemory(boost::asio::io_context& io, etcd::Client& client, std::string key,
                std::string leader_key, std::function<bool()> leading);
  ~EtcdJobMemory();
  EtcdJobMemory(const EtcdJobMemory&) = delete;
  EtcdJobMemory& operator=(const EtcdJobMemory&) = delete;

  // Reads the memory and follows it from then on; `read` runs once it is known (or known to be
  // absent), `failed` with etcd's answer when the read failed (the caller tries again). A watch
  // that etcd ends reads afresh, and runs `read` again.
  void follow(std::function<void()> read, std::function<void(const std::string&)> failed);
  bool following() const { return watch_ != nullptr; }
  const std::optional<rdzv::JobMemory>& latest() const { return latest_; }

  // Writes `memory` fenced by `epoch` on `lease`; a write that finds the leader key no longer
  // the one with `epoch` runs `fenced_out`. A write while one is under way waits, and is
  // replaced by a newer one.
  void write(const rdzv::JobMemory& memory, int64_t epoch, int64_t lease,
             std::function<void()> fenced_out);
  bool writing() const { return writing_; }
  // `then` runs once no write is under way (at once if none is).
  void after_writes(std::function<void()> then);
  // No more watching; a write under way still ends (and runs what waits for it).
  void stop();

 private:
  struct Write {
    rdzv::JobMemory memory;
    int64_t epoch = 0;
    int64_t lease = 0;
    std::function<void()> fenced_out;
  };
  void read_then_watch();
  void watch_from(int64_t revision);
  void start_write(Write write);
  void take(const std::string& value);

  boost::asio::io_context& io_;
  etcd::Client& client_;
  std::string key_;
  std::string leader_key_;
  std::function<void()> read_;
  std::function<void(const std::string&)> failed_;
  std::unique_ptr<etcd::Watch> watch_;
  std::optional<rdzv::JobMemory> latest_;
  std::function<bool()> leading_;
  bool writing_ = false;
  std::optional<Write> next_write_;
  std::function<void()> after_writes_;
  // etcd's answers may come after this is gone: they look at this first.
  std::shared_ptr<int> alive_ = std::make_shared<int>(0);
};

}  // namespace npu_run
