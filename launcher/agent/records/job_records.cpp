#include "agent/records/job_records.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>

#include "rendezvous/protocol/wire_parts.hpp"
#include "rendezvous/state/state.hpp"
#include "report/html_report.hpp"
#include "report/run_timeline.hpp"

namespace npu_run {

namespace {

nlohmann::json decision_json(const rdzv::Decision& d) {
  nlohmann::json j{{"round", d.round},
                   {"action", d.action == rdzv::Action::kRestart ? "restart" : "finish"},
                   {"restart_count", d.restart_count},
                   {"restarts_charged", d.restarts_charged},
                   {"exit_code", d.exit_code},
                   {"membership_change", d.membership_change},
                   {"class", d.failure_class},
                   {"class_reason", d.class_reason},
                   {"odd_ranks", d.odd_ranks}};
  if (d.root_cause) j["root_cause"] = rdzv::to_json(*d.root_cause);
  return j;
}

nlohmann::json rounds_json(const rdzv::RendezvousState& state) {
  std::map<uint64_t, nlohmann::json> rounds;
  for (const rdzv::RoundBlame& b : state.blames()) {
    rounds[b.round]["round"] = b.round;
    rounds[b.round]["blame"] = rdzv::to_json(b);
  }
  for (const rdzv::Decision& d : state.decisions()) {
    rounds[d.round]["round"] = d.round;
    rounds[d.round]["decision"] = decision_json(d);
  }
  nlohmann::json out = nlohmann::json::array();
  for (auto& [round, r] : rounds) out.push_back(std::move(r));
  return out;
}

// `what` names the file for people ("the job's timeline"), in a message with the fix.
void write_atomically(const std::string& path, const std::string& text, const char* what) {
  const std::string tmp = path + ".tmp";
  std::ofstream out(tmp, std::ios::trunc);
  out << text;
  out.close();
  int error = out ? 0 : (errno != 0 ? errno : EIO);  // a failed stream may leave no errno
  if (error == 0 && std::rename(tmp.c_str(), path.c_str()) != 0) error = errno;
  if (error == 0) return;
  std::error_code ignored;
  std::filesystem::remove(tmp, ignored);
  throw std::runtime_error(
      fmt::format("cannot write {} {}: {}; free space there, or give --timeline another file", what,
                  path, std::strerror(error)));
}

std::string beside(const std::string& file, const char* name) {
  const size_t slash = file.rfind('/');
  return slash == std::string::npos ? name : file.substr(0, slash + 1) + name;
}

}  // namespace

JobRecordPaths job_record_paths(const LaunchConfig& cfg, const std::string& run_dir) {
  JobRecordPaths paths;
  if (cfg.records.timeline_file) {
    paths.timeline = *cfg.records.timeline_file;
  } else if (cfg.output.log_dir) {
    paths.timeline = run_dir + "/timeline.json";
  }
  if (cfg.records.report && !paths.timeline.empty())
    paths.report = beside(paths.timeline, "report.html");
  return paths;
}

nlohmann::json timeline_json(const rdzv::RendezvousState& state) {
  nlohmann::json events = nlohmann::json::array();
  for (const rdzv::TimelineEvent& e : state.timeline().events()) events.push_back(rdzv::to_json(e));
  return {{"version", kTimelineVersion},
          {"run_id", state.settings().run_id},
          {"written", std::chrono::duration_cast<std::chrono::milliseconds>(
                          std::chrono::system_clock::now().time_since_epoch())
                          .count()},
          {"dropped", state.timeline().dropped()},
          {"thinned", state.timeline().thinned()},
          {"rounds", rounds_json(state)},
          {"events", std::move(events)}};
}

void write_job_records(const JobRecordPaths& paths, const rdzv::RendezvousState& state) {
  if (paths.timeline.empty()) return;
  try {
    const nlohmann::json timeline = timeline_json(state);
    write_atomically(paths.timeline, timeline.dump(), "the job's timeline");
    spdlog::info("the job's timeline: {}", paths.timeline);
    if (paths.report.empty()) return;
    write_atomically(paths.report, html_report(parse_run_timeline(timeline)), "the job's report");
    spdlog::info("the job's report: {}", paths.report);
  } catch (const std::exception& e) {
    spdlog::error("{}", e.what());
  }
}

}  // namespace npu_run
