// A job's timeline as node 0 wrote it (timeline.json), read back for `npu_run report`: its
// events, and per round where its start went (the blame) and how it ended (the decision).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "rendezvous/protocol/timeline.hpp"

namespace npu_run {

// One round of the job: its blame (rendezvous/state/round_blame.hpp's JSON) and its decision
// (action, exit_code, restart_count, root_cause, class, reason), each an empty object when unknown.
struct RoundRecord {
  uint64_t round = 0;
  nlohmann::json blame = nlohmann::json::object();
  nlohmann::json decision = nlohmann::json::object();
};

struct RunTimeline {
  std::string run_id;
  std::vector<rdzv::TimelineEvent> events;
  std::vector<RoundRecord> rounds;
  size_t dropped = 0;  // events node 0 had no room for
  size_t thinned = 0;  // beat samples node 0 gave up for newer events
};

inline constexpr int kTimelineVersion = 1;

// Throws std::runtime_error naming what is wrong (not JSON, another version, a bad event).
RunTimeline parse_run_timeline(const nlohmann::json& json);
// Reads `path`; throws std::runtime_error naming the file and what is wrong with it.
RunTimeline read_run_timeline(const std::string& path);

}  // namespace npu_run
