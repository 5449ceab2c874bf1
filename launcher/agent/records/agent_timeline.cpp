#include "agent/records/agent_timeline.hpp"

#include <algorithm>

#include "rendezvous/protocol/protocol.hpp"
#include "workers/progress_beats.hpp"

namespace npu_run {

namespace {

int64_t wall_ms(std::chrono::system_clock::time_point at) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(at.time_since_epoch()).count();
}

rdzv::TimelineEvent beat_event(rdzv::TimelinePhase phase, int rank, const RankProgress& p,
                               std::chrono::system_clock::time_point at) {
  rdzv::TimelineEvent e;
  e.rank = rank;
  e.phase = phase;
  e.time_ms = wall_ms(at);
  e.step = progress_value(p);
  e.detail = p.text.substr(0, AgentTimeline::kBeatDetail);
  return e;
}

}  // namespace

size_t AgentTimeline::samples_per_rank(int local_ranks) {
  // Room for the node's events and each rank's first and last beat comes first.
  const size_t room = rdzv::Limits::kMaxReportEvents - kMaxNodeEvents;
  const size_t ranks = static_cast<size_t>(std::max(local_ranks, 1));
  const size_t per_rank = room / ranks;
  return per_rank <= 2 ? 0 : std::min<size_t>(per_rank - 2, 32);
}

AgentTimeline::AgentTimeline(int local_ranks)
    : local_ranks_(std::max(local_ranks, 0)),
      per_rank_(samples_per_rank(local_ranks)),
      ranks_(static_cast<size_t>(local_ranks_)) {}

void AgentTimeline::new_round(int rank_offset) {
  rank_offset_ = rank_offset;
  interval_ = kFirstInterval;
  events_.clear();
  for (RankSamples& r : ranks_) r = RankSamples{};
}

void AgentTimeline::note(rdzv::TimelinePhase phase, int rank, std::string detail, int64_t at_ms,
                         int64_t step) {
  if (events_.size() >= kMaxNodeEvents) return;
  rdzv::TimelineEvent& e = events_.emplace_back();
  e.rank = rank;
  e.step = step;
  e.phase = phase;
  e.time_ms = at_ms > 0 ? at_ms : wall_ms(std::chrono::system_clock::now());
  if (detail.size() > rdzv::kMaxDetail) detail.resize(rdzv::kMaxDetail);
  e.detail = std::move(detail);
}

std::chrono::milliseconds AgentTimeline::sample(const ProgressBeats& beats) {
  const int ranks = std::min(local_ranks_, beats.local_ranks());
  bool full = false;
  for (int r = 0; r < ranks; ++r) {
    const RankProgress& p = beats.rank(r);
    RankSamples& mine = ranks_[static_cast<size_t>(r)];
    if (p.beats <= mine.beats_seen || per_rank_ == 0) continue;
    mine.beats_seen = p.beats;
    mine.samples.push_back(
        {p.beats, beat_event(rdzv::TimelinePhase::kBeat, rank_offset_ + r, p, p.last_wall)});
    full = full || mine.samples.size() >= per_rank_;
  }
  if (full) {
    // Every other sample goes, and the looks come half as often: the samples stay spread over
    // the whole round, however long it runs.
    for (RankSamples& mine : ranks_) {
      std::vector<Sample> kept;
      for (size_t i = 0; i < mine.samples.size(); i += 2)
        kept.push_back(std::move(mine.samples[i]));
      mine.samples = std::move(kept);
    }
    interval_ = std::min(interval_ * 2, kLongestInterval);
  }
  return interval_;
}

std::vector<rdzv::TimelineEvent> AgentTimeline::take(const ProgressBeats* beats) {
  std::vector<rdzv::TimelineEvent> out = std::move(events_);
  events_.clear();
  const int ranks = beats ? std::min(local_ranks_, beats->local_ranks()) : 0;
  for (int r = 0; r < ranks; ++r) {
    const RankProgress& p = beats->rank(r);
    RankSamples& mine = ranks_[static_cast<size_t>(r)];
    if (p.beats == 0) continue;
    rdzv::TimelineEvent first =
        beat_event(rdzv::TimelinePhase::kFirstBeat, rank_offset_ + r, p, p.first_wall);
    first.step = -1;  // its step is not known: only the last beat's text is kept
    first.detail.clear();
    out.push_back(std::move(first));
    // A sample of the last beat itself is the last beat, sent as such below.
    for (Sample& s : mine.samples) {
      if (s.beats < p.beats) out.push_back(std::move(s.event));
    }
    mine.samples.clear();
    out.push_back(beat_event(rdzv::TimelinePhase::kLastBeat, rank_offset_ + r, p, p.last_wall));
  }
  if (out.size() > rdzv::Limits::kMaxReportEvents) out.resize(rdzv::Limits::kMaxReportEvents);
  return out;
}

}  // namespace npu_run
