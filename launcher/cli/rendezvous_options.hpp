// The options of a rendezvous, one group and one set of checks for every command that runs or
// joins one: npu_run (the agents), npu_run rdzv-server, and the load generator of the benchmarks.
// The job's identity (--nnodes, --run-id, --max-restarts, the token) and its timing.
#pragma once

#include <map>
#include <optional>
#include <string>

#include "basics/token_file.hpp"
#include "cli/host_probe.hpp"
#include "cli/option_set.hpp"
#include "config/launch_config.hpp"

namespace npu_run {

struct RendezvousFlags : FlagGroup {
  // `pet` false: the token's NPU_RUN_RDZV_TOKEN only (a server has no PET_ variables).
  RendezvousFlags(OptionSet& set, const char* group, bool pet) : FlagGroup(set, group, pet) {}

  Flag<std::string> nnodes{
      *this, {.name = "--nnodes", .help = "Number of nodes, N or MIN:MAX (default 1)"}, "1"};
  Flag<std::string> run_id{
      *this,
      {.name = "--run-id",
       .help = "Job id shared by all nodes; names the log directory (default none)",
       .also = "--rdzv-id,--rdzv_id",
       .variable = variable_named("PET_RDZV_ID")},
      "none"};
  Flag<int> max_restarts{
      *this,
      {.name = "--max-restarts",
       .help = "Restart the worker group up to N times after a failure (default 0)"}};
  Flag<std::string> token{
      *this,
      {.name = "--rdzv-token",
       .help = "Shared secret every node proves it knows (HMAC challenge; never sent). Prefer the "
               "NPU_RUN_RDZV_TOKEN variable or --rdzv-token-file: a flag shows in ps until "
               "npu_run has read it",
       .variable = variable_named(kTokenVariable),
       .reach = Reach::kLauncher}};
  Flag<std::string> token_file{
      *this,
      {.name = "--rdzv-token-file",
       .help = "File whose first line is the rendezvous token (mode 600, yours). Inside a Slurm "
               "step a per-job token is derived when none is given",
       .type = "FILE",
       .reach = Reach::kLauncher}};
  Flag<double> join_timeout{
      *this,
      {.name = "--rdzv-timeout",
       .help = "Seconds to wait for all nodes to join (default 900; also rdzv-conf join_timeout)"},
      900};
  Flag<double> last_call{
      *this,
      {.name = "--rdzv-last-call",
       .help = "Elastic --nnodes MIN:MAX: seconds to wait for more nodes once MIN have joined "
               "(default 30; also rdzv-conf last_call_timeout)"},
      30};
  Flag<int> backlog{
      *this,
      {.name = "--rdzv-backlog",
       .help = "Listen backlog of the rendezvous server (default: net.core.somaxconn)"}};
  Flag<double> heartbeat_interval{
      *this,
      {.name = "--heartbeat-interval",
       .help = "Seconds between heartbeats to the rendezvous (default 5)"},
      5};
  Flag<double> heartbeat_timeout{
      *this,
      {.name = "--heartbeat-timeout",
       .help = "Seconds of silence after which a node or the server counts as lost (default 30)"},
      30};
  Flag<double> exit_barrier_timeout{
      *this,
      {.name = "--exit-barrier-timeout",
       .help = "Seconds node 0 waits, after the job ended, for every node to hear it (default "
               "300)"},
      300};
  Flag<double> handshake_timeout{
      *this,
      {.name = "--handshake-timeout",
       .help = "Seconds a new rendezvous connection has to say hello, prove the token and join "
               "(default 10; also rdzv-conf read_timeout)"},
      10};
};

// The timing, from the flags, with torchrun's --rdzv-conf keys (`conf`, named `conf_source`)
// where no flag was given: timeout/join_timeout, last_call_timeout, read_timeout,
// keep_alive_interval, keep_alive_max_attempt.
RendezvousTiming resolve_timing(const RendezvousFlags& flags,
                                const std::map<std::string, std::string>& conf = {},
                                const std::string& conf_source = "--rdzv-conf");

// The token a file or the flag (or NPU_RUN_RDZV_TOKEN) gives; nothing when neither does.
std::optional<GivenToken> resolve_given_token(const RendezvousFlags& flags, HostProbe& host);

// --max-restarts, checked.
int resolve_max_restarts(const RendezvousFlags& flags);

}  // namespace npu_run
