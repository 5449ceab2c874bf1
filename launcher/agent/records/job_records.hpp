// What node 0 leaves of a job once it has ended: its timeline (timeline.json: every event of
// every node, and per round where its start went and how it ended), and with --report the page
// `npu_run report` makes of it (report.html beside it). Written to FILE.tmp and renamed, so a
// reader never sees half a file.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "config/launch_config.hpp"

namespace npu_run {

namespace rdzv {
class RendezvousState;
}

struct JobRecordPaths {
  std::string timeline;  // empty: not written
  std::string report;    // empty: not written
};

// --timeline FILE, else <run_dir>/timeline.json under --log-dir; report.html beside it with
// --report.
JobRecordPaths job_record_paths(const LaunchConfig& cfg, const std::string& run_dir);

// The timeline file's content (report/run_timeline.hpp reads it back).
nlohmann::json timeline_json(const rdzv::RendezvousState& state);

// Writes what `paths` names; a failure is logged with the path, never thrown: the job's exit
// status stays the job's.
void write_job_records(const JobRecordPaths& paths, const rdzv::RendezvousState& state);

}  // namespace npu_run
