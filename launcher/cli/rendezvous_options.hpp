// The options of a rendezvous, one table and one set of checks for every command that runs or
// joins one: npu_run (the agents), npu_run rdzv-server, and the load generator of the benchmarks.
// The job's identity (--nnodes, --run-id, --max-restarts, the token) and its timing.
#pragma once

#include <map>
#include <optional>
#include <string>

#include "cli/cli11_fwd.hpp"
#include "cli/host_probe.hpp"
#include "cli/option_names.hpp"
#include "config/launch_config.hpp"

namespace npu_run {

// Raw values as CLI11 fills them.
struct RendezvousFlags {
  std::string nnodes = "1";
  std::string run_id = "none";
  int max_restarts = 0;
  std::string token;
  std::string token_file;
  double join_timeout = 900;
  double last_call = 30;
  int backlog = 0;
  double heartbeat_interval = 5;
  double heartbeat_timeout = 30;
  double exit_barrier_timeout = 300;
  double handshake_timeout = 10;
};

// The options added, to ask what was given and how it was spelt.
struct RendezvousOptions {
  CLI::Option* nnodes = nullptr;
  CLI::Option* run_id = nullptr;
  CLI::Option* max_restarts = nullptr;
  CLI::Option* token = nullptr;
  CLI::Option* token_file = nullptr;
  CLI::Option* join_timeout = nullptr;
  CLI::Option* last_call = nullptr;
  CLI::Option* backlog = nullptr;
  CLI::Option* heartbeat_interval = nullptr;
  CLI::Option* heartbeat_timeout = nullptr;
  CLI::Option* exit_barrier_timeout = nullptr;
  CLI::Option* handshake_timeout = nullptr;
};

// Which variables the options read: the agents' PET_<NAME> (as torchrun) and the token's
// NPU_RUN_RDZV_TOKEN, or the token's alone (a server has no PET_ variables).
enum class RendezvousVariables { kPetAndToken, kTokenOnly };

// Adds the options to `app` under `group`, binding their variables in `names`.
RendezvousOptions add_rendezvous_options(CLI::App& app, RendezvousFlags& flags, OptionNames& names,
                                         const char* group, RendezvousVariables variables);

// The timing, from the flags, with torchrun's --rdzv-conf keys (`conf`, named `conf_source`)
// where no flag was given: timeout/join_timeout, last_call_timeout, read_timeout,
// keep_alive_interval, keep_alive_max_attempt.
RendezvousTiming resolve_timing(const RendezvousFlags& flags, const RendezvousOptions& options,
                                const OptionNames& names,
                                const std::map<std::string, std::string>& conf = {},
                                const std::string& conf_source = "--rdzv-conf");

// The token a file or the flag (or NPU_RUN_RDZV_TOKEN) gives; nothing when neither does.
std::optional<GivenToken> resolve_given_token(const RendezvousFlags& flags,
                                              const RendezvousOptions& options,
                                              const OptionNames& names, HostProbe& host);

// --max-restarts, checked.
int resolve_max_restarts(const RendezvousFlags& flags, const RendezvousOptions& options,
                         const OptionNames& names);

}  // namespace npu_run
