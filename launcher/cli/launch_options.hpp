// The options of `npu_run [OPTIONS] SCRIPT [ARGS...]`: every torchrun flag in both spellings
// with its PET_<NAME> variable, npu_run's own, and those of a launch over ssh, in the groups of
// cli/option_groups.hpp, which --help lists in the order LaunchOptions declares them. The
// resolvers (cli/resolve_*.cpp) turn the values into a LaunchConfig.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "cli/option_groups.hpp"
#include "cli/option_set.hpp"

namespace npu_run {

// The table and its values, in the order --help lists them.
class LaunchOptions : public OptionSet {
 public:
  LaunchOptions();
  ~LaunchOptions();

  // CLI11's message for options given together that exclude each other, with the reason.
  std::string exclusion_reason(const std::string& clash) const;
  // --hosts or --hostfile was given: this npu_run starts the job's agents over ssh.
  bool launches_hosts() const { return hosts.hosts.given() || hosts.hostfile.given(); }

  ShapeFlags shape{*this};
  RendezvousFlags rdzv{*this, "Rendezvous", true};
  WorkerFlags worker{*this};
  SupervisionFlags supervision{*this};
  OutputFlags output{*this};
  RecordFlags records{*this};
  SnapshotFlags snapshots{*this};
  AscendFlags ascend{*this};
  HealthFlags health{*this};
  AgentFlags agent{*this};
  HostsFlags hosts{*this};
};

}  // namespace npu_run
