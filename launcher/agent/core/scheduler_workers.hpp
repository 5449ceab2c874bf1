// MindSpore's scheduler beside node 0's workers (agent/plan/framework_env.hpp), as one
// RoundWorkers: the scheduler starts first and is stopped last. A scheduler that fails while
// workers run stops them and is the round's root cause; a failed round stops the scheduler once its
// workers have ended; after every worker succeeded it gets kSchedulerGrace to end by itself
// (MindSpore's does once the cluster finished), then is stopped, which is no failure.
#pragma once

#include <chrono>
#include <memory>
#include <optional>

#include "agent/round/round_workers.hpp"

namespace npu_run {

inline constexpr std::chrono::seconds kSchedulerGrace{30};

// `scheduler` holds one process, whose outcome keeps local and global rank -1. Both groups are
// made without their own sweep of escaped processes (StopPolicy::sweep_escaped): it runs once
// both have ended, sparing `spare` (the guardian), so neither stops the other's processes.
std::unique_ptr<RoundWorkers> scheduler_beside_workers(boost::asio::io_context& io,
                                                       std::unique_ptr<RoundWorkers> scheduler,
                                                       std::unique_ptr<RoundWorkers> workers,
                                                       std::chrono::milliseconds grace,
                                                       std::vector<pid_t> spare);

// This round's workers as one RoundWorkers, each group made by `make`: on node 0 of a MindSpore
// dynamic cluster (a `scheduler` spec) its scheduler beside them, as above, sparing the guardian
// (`guardian_pid`, 0: none); elsewhere the workers alone.
std::unique_ptr<RoundWorkers> round_workers(boost::asio::io_context& io,
                                            const MakeRoundWorkers& make,
                                            std::vector<WorkerSpec> specs,
                                            std::optional<WorkerSpec> scheduler, StopPolicy policy,
                                            pid_t guardian_pid);

// The round's result from both: the workers', with the scheduler's outcome added, and the
// scheduler as the root cause when it failed by itself (not stopped by npu_run) while they ran
// (`workers_stopped_for_it`: they were stopped for that), before the workers' root cause, or
// after every worker succeeded.
GroupResult merge_scheduler_result(GroupResult workers, GroupResult scheduler,
                                   bool workers_stopped_for_it);

}  // namespace npu_run
