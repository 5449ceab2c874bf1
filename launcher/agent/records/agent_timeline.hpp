// This node's part of the job's timeline (rendezvous/protocol/timeline.hpp) for the round it is in:
// when its workers were spawned, each rank's first beat, a thinned sample of its beats, its last
// beat, failures and the workers' end, with wall-clock times. Sent with the node's report and
// forgotten: the rendezvous keeps the job's. Bounded: at most rdzv::Limits::kMaxReportEvents
// events per round, whatever the workers do; beats are sampled on a timer that slows down as
// the round goes on (the samples of a rank are halved, keeping every other one, whenever they
// fill up), so a rank beating a thousand times a second costs nothing per beat.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "rendezvous/protocol/timeline.hpp"

namespace npu_run {

class ProgressBeats;

class AgentTimeline {
 public:
  // `local_ranks`: the node's workers; their sampled beats share the report's room.
  explicit AgentTimeline(int local_ranks);

  // A new round: what was not sent is dropped, and the sampling starts fast again.
  void new_round(int rank_offset);
  // An event of the node (rank -1) or of a global rank, at `at_ms` (0: now).
  void note(rdzv::TimelinePhase phase, int rank = -1, std::string detail = "", int64_t at_ms = 0,
            int64_t step = -1);
  // Looks at the ranks' beats: a rank that beat since the last look gets a sample. Returns the
  // time until the next look is due.
  std::chrono::milliseconds sample(const ProgressBeats& beats);
  // The round's events for the report: the node's, then each rank's first beat, samples and
  // last beat; at most rdzv::Limits::kMaxReportEvents.
  std::vector<rdzv::TimelineEvent> take(const ProgressBeats* beats);

  // How many samples each rank keeps, and how often beats are first looked at.
  static size_t samples_per_rank(int local_ranks);
  static constexpr std::chrono::milliseconds kFirstInterval{500};
  static constexpr std::chrono::milliseconds kLongestInterval{600'000};
  // A beat's text in the timeline: enough to read a step and a loss.
  static constexpr size_t kBeatDetail = 48;

 private:
  struct Sample {
    uint64_t beats = 0;  // the rank's beats when it was taken
    rdzv::TimelineEvent event;
  };
  struct RankSamples {
    uint64_t beats_seen = 0;
    std::vector<Sample> samples;
  };
  int local_ranks_;
  int rank_offset_ = 0;
  size_t per_rank_;
  std::chrono::milliseconds interval_ = kFirstInterval;
  std::vector<rdzv::TimelineEvent> events_;  // the node's, bounded by kMaxNodeEvents
  std::vector<RankSamples> ranks_;
  static constexpr size_t kMaxNodeEvents = 64;
};

}  // namespace npu_run
