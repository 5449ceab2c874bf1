// What one node cannot check before the rendezvous: the device counts of every server (--soc),
// and the rank table, built from every node's devices (--rank-table auto) or the given one
// matched against the ranks this node was assigned.
#pragma once

#include <optional>
#include <string>

#include "agent/link/assignment.hpp"
#include "config/launch_config.hpp"

namespace npu_run {

// Why this node cannot run the job as assigned (exit 2 on every node); nothing when it can.
// Warnings are logged.
std::optional<std::string> job_refusal(const LaunchConfig& cfg, const Assignment& a);

// The RANK_TABLE_FILE this node's workers get: the given table, or one built from every node
// and written to `run_dir`/rank_table.json now; "" without a rank table. Throws UsageError when
// the table cannot be written.
std::string rank_table_file(const LaunchConfig& cfg, const Assignment& a,
                            const std::string& run_dir);

// Readies `a` to run here: its RANK_TABLE_FILE (above); or why the job cannot run here, the
// refusal above or a rank table that cannot be written.
std::optional<std::string> prepare_round(const LaunchConfig& cfg, Assignment& a,
                                         const std::string& run_dir);

}  // namespace npu_run
