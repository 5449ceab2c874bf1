// Each host's part of a launch over ssh: its node rank, workers and devices, the agent's
// command line, the ssh command that runs it, and (--ssh-tree) which host starts which.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "config/hosts_launch.hpp"
#include "remote/preamble.hpp"
#include "remote/ssh_command.hpp"

namespace npu_run {

struct HostPlan {
  HostSlots host;
  int node_rank = 0;
  std::string nproc;                    // the agent's --nproc-per-node
  std::vector<std::string> agent_args;  // the agent's options, "--", the script and its args
  std::vector<std::string> ssh;         // the whole ssh command, program first
};

// `master_addr`: where the agents meet when the user did not say (node 0's address). `program`:
// the npu_run each host runs (this one's path), unless `shipped`.
std::vector<HostPlan> plan_hosts(const HostsLaunch& launch, const std::string& master_addr,
                                 const std::string& program,
                                 const std::optional<ShippedBinary>& shipped);

// Who starts whom: the launcher starts `roots`; host i starts children[i]. Without a tree every
// host is a root. With one, each starter starts at most `fanout` hosts and hands the rest, in
// order and in equal parts, to them to start in turn: 1,000 hosts at fan-out 32 take two rounds.
struct StartTree {
  std::vector<size_t> roots;
  std::vector<std::vector<size_t>> children;
};
StartTree start_tree(size_t hosts, int fanout, bool tree);

// What host `index` starts, as its preamble carries it.
std::vector<ChildHost> child_hosts(const std::vector<HostPlan>& plans, const StartTree& tree,
                                   size_t index, bool ship_binary);

}  // namespace npu_run
