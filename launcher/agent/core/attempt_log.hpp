// What the agent says about an attempt's life, in the words users grep for: its start (and the
// OMP_NUM_THREADS default), a node waiting for the others, restarts and re-forms, success, and
// on failure the summary table with the job's root cause (agent/records/failure_summary.hpp).
#pragma once

#include <string>

#include "agent/core/attempt.hpp"
#include "basics/environment.hpp"
#include "config/launch_config.hpp"

namespace npu_run {

void log_attempt_start(const LaunchConfig& cfg, const Assignment& a, const EnvMap& agent_env,
                       size_t workers);
// After the report: a node done first says it waits for the others (else it looks hung).
void log_report_sent(const rdzv::Report& report, int nnodes);
void log_restart(const LaunchConfig& cfg, const rdzv::Decision& d, const Attempt& attempt);
void log_success(const Attempt& attempt);
// The job ended with a failure: the summary of this node's workers (after a hang with the job's
// comparison of every rank's stack applied, which may blame another rank), and the root cause
// when it is elsewhere or the job has several nodes.
void log_job_failure(const LaunchConfig& cfg, const rdzv::Decision& d, Attempt& attempt);
// The failure summary of `result` on this node; `stopped_because` is SummaryContext's.
void print_summary(const GroupResult& result, const Assignment& a,
                   const std::string& stopped_because);

}  // namespace npu_run
