#include "remote/host_plan.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace npu_run {

namespace {

bool has_option(const std::vector<std::string>& args, const std::string& name) {
  return std::any_of(args.begin(), args.end(), [&](const std::string& a) {
    return a == name || a.rfind(name + "=", 0) == 0;
  });
}

// Hosts `block` below `starter`: the first `fanout` are its own, the rest shared among them.
void assign(std::vector<size_t>& starts, std::vector<std::vector<size_t>>& children,
            std::vector<size_t> block, int fanout) {
  const size_t own = std::min(block.size(), static_cast<size_t>(fanout));
  starts.assign(block.begin(), block.begin() + static_cast<std::ptrdiff_t>(own));
  const size_t rest = block.size() - own;
  size_t next = own;
  for (size_t i = 0; i < own; ++i) {
    // Equal parts, the first ones one larger when the rest does not divide evenly.
    const size_t part = rest / own + (i < rest % own ? 1 : 0);
    std::vector<size_t> sub(block.begin() + static_cast<std::ptrdiff_t>(next),
                            block.begin() + static_cast<std::ptrdiff_t>(next + part));
    next += part;
    assign(children[starts[i]], children, std::move(sub), fanout);
  }
}

}  // namespace

std::vector<HostPlan> plan_hosts(const HostsLaunch& launch, const std::string& master_addr,
                                 const std::string& program,
                                 const std::optional<ShippedBinary>& shipped) {
  std::vector<HostPlan> plans;
  const int hosts = static_cast<int>(launch.hosts.size());
  const int nodes = hosts - launch.spares;  // the last hosts are spares: ranks nodes.. on
  for (int rank = 0; rank < hosts; ++rank) {
    HostPlan plan;
    plan.host = launch.hosts[static_cast<size_t>(rank)];
    plan.node_rank = rank;
    plan.nproc = plan.host.slots ? std::to_string(*plan.host.slots) : launch.nproc_per_node;
    std::vector<std::string>& args = plan.agent_args;
    args = launch.agent_options;
    if (!has_option(args, "--nnodes")) args.push_back(fmt::format("--nnodes={}", nodes));
    args.push_back(fmt::format("--node-rank={}", rank));
    args.push_back("--nproc-per-node=" + plan.nproc);
    if (!plan.host.devices.empty())
      args.push_back(fmt::format("--devices={}", fmt::join(plan.host.devices, ",")));
    if (!launch.rendezvous_given) args.push_back("--master-addr=" + master_addr);
    // Every line of the host's workers names the host, as the hostfile does.
    args.push_back(fmt::format("--log-line-prefix-template={}: {}", plan.host.name,
                               launch.prefix_template.value_or("")));
    args.emplace_back("--");
    args.insert(args.end(), launch.script_and_args.begin(), launch.script_and_args.end());
    plan.ssh = ssh_argv(
        launch.ssh, plan.host.name,
        remote_agent_command(launch.working_directory, program, plan.host.name, args, shipped));
    plans.push_back(std::move(plan));
  }
  return plans;
}

StartTree start_tree(size_t hosts, int fanout, bool tree) {
  StartTree result;
  result.children.resize(hosts);
  std::vector<size_t> all(hosts);
  for (size_t i = 0; i < hosts; ++i) all[i] = i;
  if (!tree) {
    result.roots = std::move(all);
    return result;
  }
  assign(result.roots, result.children, std::move(all), std::max(1, fanout));
  return result;
}

std::vector<ChildHost> child_hosts(const std::vector<HostPlan>& plans, const StartTree& tree,
                                   size_t index, bool ship_binary) {
  std::vector<ChildHost> children;
  for (size_t child : tree.children[index]) {
    children.push_back(ChildHost{plans[child].host.name, plans[child].ssh, ship_binary,
                                 child_hosts(plans, tree, child, ship_binary)});
  }
  return children;
}

}  // namespace npu_run
