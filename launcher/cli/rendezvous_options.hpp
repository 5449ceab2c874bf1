// The checks of a rendezvous' options (RendezvousFlags, cli/option_groups.hpp), one set for every
// command that runs or joins one: npu_run (the agents), npu_run rdzv-server, and the load
// generator of the benchmarks.
#pragma once

#include <map>
#include <optional>
#include <string>

#include "cli/host_probe.hpp"
#include "cli/option_groups.hpp"
#include "config/launch_config.hpp"

namespace npu_run {

// The timing, from the flags, with torchrun's --rdzv-conf keys (`conf`, named `conf_source`)
// where no flag was given: timeout/join_timeout, last_call_timeout, read_timeout,
// keep_alive_interval, keep_alive_max_attempt. `interval_cap`: the longest default heartbeat
// interval (an etcd rendezvous needs them often); one the user chose stands.
RendezvousTiming resolve_timing(const RendezvousFlags& flags,
                                const std::map<std::string, std::string>& conf = {},
                                const std::string& conf_source = "--rdzv-conf",
                                std::optional<std::chrono::milliseconds> interval_cap = {});

// The token a file or the flag (or NPU_RUN_RDZV_TOKEN) gives; nothing when neither does.
std::optional<GivenToken> resolve_given_token(const RendezvousFlags& flags, HostProbe& host);

// --max-restarts, checked.
int resolve_max_restarts(const RendezvousFlags& flags);

}  // namespace npu_run
