// What one node cannot check before the rendezvous: the device counts of every server (--soc),
// and the rank table, built from every node's devices (--rank-table auto) or the given one
// matched against the ranks this node was assigned.
#pragma once

#include <string>

#include "agent/assignment.hpp"
#include "config/launch_config.hpp"

namespace npu_run {

// Checks the job and, for a rank table, sets `a.rank_table_file` (an auto table is written to
// `run_dir`/rank_table.json). Returns why the job cannot run, or "". Warnings are logged.
std::string prepare_job(const LaunchConfig& cfg, Assignment& a, const std::string& run_dir);

}  // namespace npu_run
