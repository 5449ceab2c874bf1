#include "rendezvous/protocol/timeline.hpp"

#include <array>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <utility>

namespace npu_run::rdzv {

namespace {

constexpr std::array<std::pair<TimelinePhase, const char*>, 17> kPhaseNames{{
    {TimelinePhase::kAgentStart, "agent_start"},
    {TimelinePhase::kContact, "contact"},
    {TimelinePhase::kJoin, "join"},
    {TimelinePhase::kGate, "health_verdict"},
    {TimelinePhase::kFormed, "assigned"},
    {TimelinePhase::kSpawned, "spawned"},
    {TimelinePhase::kFirstBeat, "first_beat"},
    {TimelinePhase::kBeat, "beat"},
    {TimelinePhase::kLastBeat, "last_beat"},
    {TimelinePhase::kFailed, "failed"},
    {TimelinePhase::kRecords, "records"},
    {TimelinePhase::kRestore, "restore"},
    {TimelinePhase::kExited, "exit"},
    {TimelinePhase::kLost, "lost"},
    {TimelinePhase::kRestart, "restart"},
    {TimelinePhase::kFinished, "finished"},
    {TimelinePhase::kStraggler, "straggler"},
}};

}  // namespace

const char* phase_name(TimelinePhase phase) {
  for (const auto& [p, name] : kPhaseNames) {
    if (p == phase) return name;
  }
  return "?";
}

std::optional<TimelinePhase> phase_from(const std::string& name) {
  for (const auto& [p, n] : kPhaseNames) {
    if (name == n) return p;
  }
  return std::nullopt;
}

nlohmann::json to_json(const TimelineEvent& event) {
  nlohmann::json j{{"node", event.node},
                   {"host", event.host},
                   {"rank", event.rank},
                   {"round", event.round},
                   {"phase", phase_name(event.phase)},
                   {"time", event.time_ms}};
  if (event.step >= 0) j["step"] = event.step;
  if (!event.detail.empty()) j["detail"] = event.detail;
  return j;
}

TimelineEvent timeline_event_from(const nlohmann::json& object) {
  if (!object.is_object()) throw std::invalid_argument("a timeline event is not a JSON object");
  TimelineEvent event;
  const std::string phase = object.value("phase", "");
  const auto known = phase_from(phase);
  if (!known) throw std::invalid_argument("a timeline event has an unknown phase '" + phase + "'");
  event.phase = *known;
  event.node = object.value("node", -1);
  event.host = object.value("host", "");
  event.rank = object.value("rank", -1);
  event.round = object.value("round", uint64_t{0});
  event.time_ms = object.value("time", int64_t{0});
  event.step = object.value("step", int64_t{-1});
  event.detail = object.value("detail", "");
  return event;
}

void JobTimeline::add(TimelineEvent event) {
  if (size() >= kMaxEvents) {
    if (samples_.empty()) {
      ++dropped_;
      return;
    }
    events_[samples_.front()].time_ms = -1;  // the oldest sample makes room
    samples_.pop_front();
    ++evicted_;
    ++thinned_;
    if (evicted_ > kMaxEvents / 4) compact();
  }
  if (event.detail.size() > kMaxDetail) event.detail.resize(kMaxDetail);
  if (event.phase == TimelinePhase::kBeat) samples_.push_back(events_.size());
  events_.push_back(std::move(event));
}

void JobTimeline::compact() {
  std::vector<TimelineEvent> kept;
  kept.reserve(size());
  samples_.clear();
  for (TimelineEvent& e : events_) {
    if (e.time_ms < 0) continue;
    if (e.phase == TimelinePhase::kBeat) samples_.push_back(kept.size());
    kept.push_back(std::move(e));
  }
  events_ = std::move(kept);
  evicted_ = 0;
}

std::vector<TimelineEvent> JobTimeline::events() const {
  std::vector<TimelineEvent> kept;
  kept.reserve(size());
  for (const TimelineEvent& e : events_) {
    if (e.time_ms >= 0) kept.push_back(e);
  }
  return kept;
}

}  // namespace npu_run::rdzv
