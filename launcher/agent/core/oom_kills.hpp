// How many processes the kernel's OOM killer has killed in this agent's memory cgroup (its
// workers are in it too, or in a child of it under Slurm's task cgroups, which the counter of
// cgroup v2 includes): read before and after an attempt, a difference says a SIGKILL the agent
// did not send came from the OOM killer.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace npu_run {

// The `oom_kill` count of memory.events (cgroup v2) or memory.oom_control (cgroup v1, Linux
// 4.13+) of the cgroup that `proc_cgroup` (the text of /proc/self/cgroup) names, under
// `cgroup_root` (normally /sys/fs/cgroup); none where there is no such counter.
std::optional<uint64_t> oom_kill_count(const std::string& proc_cgroup,
                                       const std::string& cgroup_root);

// The same for this process, as the system shows it now.
std::optional<uint64_t> own_oom_kill_count();

}  // namespace npu_run
