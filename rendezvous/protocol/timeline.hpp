// The job's timeline: every moment npu_run knows of a round, with its wall-clock time, so that
// a slow start or a long night of restarts can be read afterwards (`timeline.json`, `npu_run
// report`). Each agent records its own (agent/records/agent_timeline.hpp) and sends them with its
// report; the rendezvous adds what it sees (contacts, joins, verdicts, formations, decisions)
// and keeps the whole, bounded: at kMaxEvents the oldest beat samples make room for newer
// events (a rank's first and last beat of every round stay), and only once no sample is left
// are new events dropped, and counted.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

namespace npu_run::rdzv {

enum class TimelinePhase {
  kAgentStart,  // the node's agent started (from its join)
  kContact,     // its first hello reached the rendezvous
  kJoin,        // its join reached the rendezvous
  kGate,        // its health verdict reached the rendezvous (detail: how long, the slowest call)
  kFormed,      // the round formed with the node in it (node rank known from here on)
  kSpawned,     // its workers were started
  kFirstBeat,   // a rank's first progress beat of the round (step: from its text)
  kBeat,        // a sample of a rank's beats between the first and the last
  kLastBeat,    // a rank's last beat of the round
  kFailed,      // a rank (or the whole node: rank -1) failed; detail: what happened
  kRecords,     // a hang's records of a rank were kept (detail: its files, on the node's host)
  kRestore,     // the node's ranks loaded the round's snapshot (step; detail: source, time, lost)
  kExited,      // the node's workers were all done
  kLost,        // the rendezvous lost the node
  kRestart,     // the job's decision: another round (node -1; detail: why)
  kFinished,    // the job's decision: the end (node -1; detail: the exit code)
  kStraggler,   // the straggler watch named the node (rank: the one most often last; detail: why)
};

// "agent_start", "contact", ... as in timeline.json; nullopt for an unknown name.
const char* phase_name(TimelinePhase phase);
std::optional<TimelinePhase> phase_from(const std::string& name);

struct TimelineEvent {
  int node = -1;  // node rank; -1: the job's, or not seated yet
  std::string host;
  int rank = -1;  // global rank; -1: the node's
  uint64_t round = 0;
  TimelinePhase phase = TimelinePhase::kJoin;
  int64_t time_ms = 0;   // wall clock, ms since the epoch
  int64_t step = -1;     // beats: the last number in the beat's text, else the beat count
  std::string detail{};  // at most kMaxDetail bytes
};

inline constexpr size_t kMaxDetail = 200;

nlohmann::json to_json(const TimelineEvent& event);
// Throws std::invalid_argument naming what is wrong.
TimelineEvent timeline_event_from(const nlohmann::json& object);

// The job's events at node 0 (or the elected leader), in arrival order.
class JobTimeline {
 public:
  // 1,024 nodes x 8 ranks of one round with every sample (34 events a rank), with room to spare;
  // about 150 bytes each: 60 MB at most.
  static constexpr size_t kMaxEvents = 400'000;

  void add(TimelineEvent event);
  // What is kept, in arrival order.
  std::vector<TimelineEvent> events() const;
  size_t size() const { return events_.size() - evicted_; }
  // Beat samples given up for newer events, and events that found no room at all.
  size_t thinned() const { return thinned_; }
  size_t dropped() const { return dropped_; }

 private:
  void compact();
  std::vector<TimelineEvent> events_;  // evicted ones stay until compact(), with time_ms -1
  std::deque<size_t> samples_;         // indices of beat samples, oldest first
  size_t evicted_ = 0;
  size_t thinned_ = 0;
  size_t dropped_ = 0;
};

}  // namespace npu_run::rdzv
