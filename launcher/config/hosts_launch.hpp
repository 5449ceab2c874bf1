// HostsLaunch: a job started from one node over ssh (--hosts, --hostfile), resolved and checked
// by the cli layer. The launching npu_run runs no worker itself: it starts one agent per host
// and gives each the same options, plus its node rank, its slots and the rendezvous address.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "cluster/host_slots.hpp"
#include "config/launch_config.hpp"

namespace npu_run {

// How ssh is run: the user's ssh (and ~/.ssh/config), with these additions.
struct SshSettings {
  std::string program = "ssh";       // as found on PATH ($NPU_RUN_SSH overrides)
  std::optional<int> port;           // --ssh-port
  std::vector<std::string> options;  // --ssh-option, in order, before npu_run's defaults
  int fanout = 32;                   // connections being opened at once
  bool tree = false;                 // hosts start hosts (--ssh-tree)
  bool ship_binary = false;          // --ship-binary
};

// One variable passed to every host, and where it came from ("--env", "PATH (default)",
// ".npu_run_env line 3"), for the plan.
struct PassedVariable {
  std::string name;
  std::string value;
  std::string source;
};

struct HostsLaunch {
  std::vector<HostSlots> hosts;  // node 0 first
  SshSettings ssh;
  std::vector<PassedVariable> env;
  std::string working_directory;  // each agent starts there (cd), as the user is here
  // The agents' options every host gets, as typed here minus those the launcher sets per host;
  // then the script and its arguments.
  std::vector<std::string> agent_options;
  std::vector<std::string> script_and_args;
  // --nproc-per-node as given, for hosts without slots ("8", "auto": each host counts its own).
  std::string nproc_per_node = "1";
  // --master-addr or --rdzv-endpoint was given (and is among agent_options); else each host gets
  // --master-addr: node 0's address, its HostName as `ssh -G` resolves it.
  bool rendezvous_given = false;
  std::string master_addr;
  int master_port = 29500;
  // The user's --log-line-prefix-template; each host's lines get "HOST: " before it.
  std::optional<std::string> prefix_template;
  // The token the hosts get through ssh's stdin: given, else made at launch (NoToken here).
  RendezvousToken token;
  AgentOptions agent;  // log level, --dry-run, --json
  // --spares K: the last K hosts start as spares (node ranks from the job's node count on).
  int spares = 0;
  // Hosts the ledger of bad nodes keeps out, each with its entry: left out of `hosts`.
  std::vector<std::string> ledgered;
};

}  // namespace npu_run
