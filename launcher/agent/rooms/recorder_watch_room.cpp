// The flight recorders' own watchdogs as a hang's trigger. torch_npu's (TORCH_HCCL_DUMP_ON_TIMEOUT)
// and torch's NCCL one write a rank's recorder to <prefix><rank> (TORCH_HCCL_DEBUG_INFO_TEMP_FILE,
// TORCH_NCCL_DEBUG_INFO_TEMP_FILE: the rank's directory of the attempt,
// agent/rooms/recorder_room.cpp) when a collective outlives their timeout, just before the rank
// aborts. A rank whose dump appears is hung for npu_run as a rank silent past --hang-timeout is:
// every rank's records are collected at once on every node, and the job's blame names the rank at
// fault (the one whose watchdog fired is usually one left waiting for it). It needs no
// --hang-timeout and no beat. Looked for every half second while the workers run: a stat() per rank
// and prefix.
#include <sys/stat.h>

#include <algorithm>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <string>
#include <vector>

#include "agent/core/attempt.hpp"
#include "agent/rooms/agent_rooms.hpp"
#include "agent/round/hang_watch.hpp"

namespace npu_run {
namespace {

constexpr std::chrono::milliseconds kLookEvery{500};
// The variables whose value, with the global rank after it, names a watchdog's dump.
constexpr const char* kDumpPrefixes[] = {"TORCH_HCCL_DEBUG_INFO_TEMP_FILE",
                                         "TORCH_NCCL_DEBUG_INFO_TEMP_FILE",
                                         "TORCH_FR_DUMP_TEMP_FILE"};

struct WatchedDump {
  int local_rank = 0;
  std::string path;
  int64_t seen_mtime_ns = -1;  // before the workers started; -1: absent
};

int64_t mtime_ns(const std::string& path) {
  struct stat info {};
  if (::stat(path.c_str(), &info) != 0) return -1;
  return static_cast<int64_t>(info.st_mtim.tv_sec) * 1'000'000'000 + info.st_mtim.tv_nsec;
}

class RecorderWatchRoom final : public AgentRoom {
 public:
  RecorderWatchRoom(const RoomContext& ctx, std::shared_ptr<const AskedPipeDumps> asked)
      : ctx_(ctx), timer_(ctx.io), asked_(std::move(asked)) {}

  void starting(std::vector<WorkerSpec>& specs) override {
    dumps_.clear();
    for (const WorkerSpec& spec : specs) {
      for (const char* variable : kDumpPrefixes) {
        const auto prefix = spec.env.find(variable);
        if (prefix == spec.env.end() || prefix->second.empty()) continue;
        const std::string path = prefix->second + std::to_string(spec.global_rank);
        if (std::any_of(dumps_.begin(), dumps_.end(),
                        [&](const WatchedDump& d) { return d.path == path; }))
          continue;  // torch's two spellings of one prefix
        dumps_.push_back(WatchedDump{spec.local_rank, path, mtime_ns(path)});
      }
    }
  }

  void started(Attempt& /*attempt*/) override {
    if (!dumps_.empty()) look_later();
  }

  void done(GroupEnd& /*end*/, Attempt& /*attempt*/) override {
    dumps_.clear();
    timer_.cancel();
  }

 private:
  void look_later() {
    timer_.expires_after(kLookEvery);
    timer_.async_wait([this, alive = std::weak_ptr<int>(alive_)](boost::system::error_code ec) {
      if (ec || alive.expired()) return;
      if (std::chrono::steady_clock::now() < asked_->until) {
        rebaseline();  // the dumps `npu_run status --dump` asked for
      } else if (const WatchedDump* dump = new_dump()) {
        return found(*dump);
      }
      look_later();
    });
  }

  const WatchedDump* new_dump() const {
    for (const WatchedDump& d : dumps_) {
      const int64_t now = mtime_ns(d.path);
      if (now >= 0 && now != d.seen_mtime_ns) return &d;
    }
    return nullptr;
  }

  void rebaseline() {
    for (WatchedDump& d : dumps_) d.seen_mtime_ns = mtime_ns(d.path);
  }

  void found(const WatchedDump& dump) {
    Hang hang;
    hang.kind = Hang::Kind::kRecorderTimeout;
    hang.local_rank = dump.local_rank;
    hang.recorder_dump = dump.path;
    dumps_.clear();  // once per attempt: the agent takes it from here
    ctx_.host.hung(hang);
  }

  RoomContext ctx_;
  boost::asio::steady_timer timer_;
  std::vector<WatchedDump> dumps_;
  std::shared_ptr<const AskedPipeDumps> asked_;
  std::shared_ptr<int> alive_ = std::make_shared<int>(0);
};

}  // namespace

std::unique_ptr<AgentRoom> recorder_watch_room(const RoomContext& ctx,
                                               std::shared_ptr<const AskedPipeDumps> asked) {
  return std::make_unique<RecorderWatchRoom>(ctx, std::move(asked));
}

}  // namespace npu_run
