// What this node does about hung workers (issue 18), one per attempt: with --hang-timeout or
// --exit-timeout it watches the beats (agent/round/hang_watch.hpp), and on a hang, its own or
// another node's, at the moment every node of the job does the same, it collects every worker's
// stacks and flight records through their worker servers without killing
// (agent/hangs/hang_collection.hpp), then stops the group as a failure does: with SIGTERM when
// every rank answered, else with SIGABRT, on which faulthandler prints the stacks of those that
// could not answer (core files off). Once the group is done it writes the dump into the result: the
// hung rank as root cause, each rank's last beat and top frames, and the records the rendezvous
// compares across the job.
#pragma once

#include <sys/types.h>

#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "agent/hangs/hang_collection.hpp"
#include "agent/link/assignment.hpp"
#include "agent/link/rendezvous.hpp"
#include "agent/round/hang_watch.hpp"
#include "agent/round/round_workers.hpp"
#include "config/launch_config.hpp"
#include "rendezvous/protocol/messages.hpp"
#include "workers/group_result.hpp"
#include "workers/progress_beats.hpp"

namespace npu_run {

class HangResponse {
 public:
  struct Context {
    const LaunchConfig& cfg;
    const Assignment& assignment;
    const ProgressBeats* beats;  // null: none could be made, nothing to watch
    RoundWorkers& group;
    Rendezvous& rendezvous;
    std::vector<RankToCollect> ranks;  // every local rank's server and directory (pids unset)
  };
  // `found` hears of each hang the watch finds; whether to respond is the agent's call (not
  // while it stops the workers for another reason).
  HangResponse(boost::asio::io_context& io, Context context,
               std::function<void(const Hang&)> found);
  HangResponse(const HangResponse&) = delete;
  HangResponse& operator=(const HangResponse&) = delete;

  // The group has started: watch from now on.
  void start();
  // This node's worker hung: dump every worker's stacks (a multi-node job first tells the
  // rendezvous, so that every node dumps at the same moment).
  void respond(const Hang& hang);
  // Another node's worker hung (`root`): dump this node's workers at the job's moment.
  void dump_for(const rdzv::FailureReport& root);
  // The group is done: no more watching.
  void stop();

  bool dumped() const { return dumped_at_.has_value(); }
  // This node's hang as it reports it.
  rdzv::FailureReport failure(const Hang& hang) const;
  // Into the group's result: the hung rank as root cause (`hang`, when it was this node's),
  // and each worker's last beat and, for one that is not Python, its kernel frames.
  void annotate(GroupResult& result, const Hang* hang) const;
  // The stacks of the dump, as the report carries them.
  std::vector<rdzv::RankStack> stacks(const GroupResult& result) const;

 private:
  void dump_at(int64_t hang_time_ms, std::vector<pid_t> pids);
  void dump_stacks(const std::vector<pid_t>& pids);
  void stop_collected(const std::vector<pid_t>& pids,
                      std::chrono::steady_clock::time_point not_before);
  void stop_workers(const std::vector<pid_t>& pids);
  std::chrono::steady_clock::time_point stop_not_before(
      std::chrono::steady_clock::time_point not_before) const;
  const CollectedRank* collected_of(pid_t pid) const;
  std::vector<rdzv::RankBeat> beats_at_dump() const;

  Context ctx_;
  std::unique_ptr<HangWatch> watch_;
  boost::asio::steady_timer dump_timer_;
  std::optional<std::chrono::steady_clock::time_point> dumped_at_;
  // A hang its recorder's watchdog found: the rank and the dump it wrote, not asked for again.
  std::optional<std::pair<int, std::string>> watchdog_dump_;
  boost::asio::io_context& io_;
  std::map<pid_t, std::vector<std::string>> kernel_frames_;  // non-Python workers', at the dump
  std::vector<CollectedRank> collected_;                     // through the worker servers
  bool stopped_ = false;
  // The dump timer's handler may already be queued when this goes: it checks this first.
  std::shared_ptr<bool> alive_ = std::make_shared<bool>(true);
};

}  // namespace npu_run
