// --dry-run output: the resolved plan (node, ranks, each worker's command, environment and
// output routing) as text for people or JSON for scripts.
#pragma once

#include <string>
#include <vector>

#include "agent/link/assignment.hpp"
#include "agent/plan/worker_plan.hpp"
#include "basics/text.hpp"
#include "config/launch_config.hpp"

namespace npu_run {

// The plan of this node as --dry-run prints it (text, or JSON with --json): the assignment it
// would get, its workers and where their files go. Starts nothing.
std::string format_plan(const LaunchConfig& cfg, const EnvMap& env, const std::string& host);

std::string format_plan_text(const LaunchConfig& cfg, const Assignment& assignment,
                             const std::vector<WorkerSpec>& specs, const std::string& run_dir);
std::string format_plan_json(const LaunchConfig& cfg, const Assignment& assignment,
                             const std::vector<WorkerSpec>& specs, const std::string& run_dir);

}  // namespace npu_run
