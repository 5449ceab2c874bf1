#include "report/run_timeline.hpp"

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace npu_run {

RunTimeline parse_run_timeline(const nlohmann::json& json) {
  if (!json.is_object() || !json.contains("events") || !json["events"].is_array() ||
      !json.contains("version"))
    throw std::runtime_error("it is not an npu_run timeline (no 'events' array)");
  const int version = json.value("version", 0);
  if (version != kTimelineVersion) {
    throw std::runtime_error(
        fmt::format("it is a timeline of version {}, and this npu_run reads version {}", version,
                    kTimelineVersion));
  }
  RunTimeline run;
  run.run_id = json.value("run_id", "");
  run.dropped = json.value("dropped", size_t{0});
  run.thinned = json.value("thinned", size_t{0});
  run.events.reserve(json["events"].size());
  for (const nlohmann::json& e : json["events"]) {
    try {
      run.events.push_back(rdzv::timeline_event_from(e));
    } catch (const std::exception& bad) {
      throw std::runtime_error(fmt::format("event {}: {}", run.events.size(), bad.what()));
    }
  }
  for (const nlohmann::json& r : json.value("rounds", nlohmann::json::array())) {
    if (!r.is_object()) continue;
    RoundRecord& record = run.rounds.emplace_back();
    record.round = r.value("round", uint64_t{0});
    if (r.contains("blame") && r["blame"].is_object()) record.blame = r["blame"];
    if (r.contains("decision") && r["decision"].is_object()) record.decision = r["decision"];
  }
  return run;
}

RunTimeline read_run_timeline(const std::string& path) {
  std::ifstream in(path);
  if (!in) {
    throw std::runtime_error(fmt::format("cannot read {}: {}", path, std::strerror(errno)));
  }
  std::stringstream text;
  text << in.rdbuf();
  try {
    return parse_run_timeline(nlohmann::json::parse(text.str()));
  } catch (const nlohmann::json::exception& e) {
    throw std::runtime_error(fmt::format("{} is not JSON: {}", path, e.what()));
  } catch (const std::runtime_error& e) {
    throw std::runtime_error(fmt::format("{}: {}", path, e.what()));
  }
}

}  // namespace npu_run
