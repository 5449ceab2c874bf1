// The steps that turn the launch options into a LaunchConfig, one concern each, in the order
// parse_launch.cpp runs them (which decides which of several mistakes is reported first). Each
// throws UsageError naming the flag (or PET_ variable) and the fix.
#pragma once

#include <string>
#include <vector>

#include "basics/environment.hpp"
#include "cli/host_probe.hpp"
#include "cli/launch_options.hpp"
#include "cli/rendezvous_options.hpp"
#include "cluster/cluster_env.hpp"
#include "config/hosts_launch.hpp"
#include "config/launch_config.hpp"

namespace npu_run {

struct LaunchInputs {
  const LaunchOptions& options;
  const EnvMap& env;
  HostProbe& host;
  const ClusterDefaults& cluster;
};

// Nodes, node rank, workers per node and their devices (cli/resolve_shape.cpp).
void resolve_shape(const LaunchInputs& in, JobShape& shape);
// --node-order, --topology, --sp-block (cli/resolve_placement.cpp).
void resolve_placement(const LaunchInputs& in, const JobShape& shape, Placement& placement);
// Master, endpoint, backend, --rdzv-conf, timing, run id and token (cli/resolve_rendezvous.cpp).
// A missing secret for a Slurm step's token is a warning, added to `warnings`.
void resolve_rendezvous(const LaunchInputs& in, const JobShape& shape, RendezvousConfig& rdzv,
                        std::vector<std::string>& warnings);
// Restarts, the grace period, stop signals, the agent's own options (cli/resolve_supervision.cpp).
// --rdzv-backend etcd|etcd-v2: members, prefix, login, lease (cli/resolve_etcd.cpp); nothing
// for the other backends.
std::optional<EtcdSettings> resolve_etcd(const LaunchInputs& in, const JobShape& shape,
                                         const RendezvousConfig& rdzv);
void resolve_supervision(const LaunchInputs& in, SupervisionConfig& supervision,
                         AgentOptions& agent);
// --soc, --rank-table, --hccn-conf (cli/resolve_ascend.cpp).
void resolve_ascend(const LaunchInputs& in, const JobShape& shape, AscendConfig& ascend);
// --health-check and its settings; auto becomes gate or off where the agent runs
// (cli/resolve_health.cpp).
void resolve_health(const LaunchInputs& in, HealthGateSettings& health);
// -r, -t, --log-dir, --local-ranks-filter, the console prefix (cli/resolve_outputs.cpp).
void resolve_outputs(const LaunchInputs& in, int nproc_per_node, OutputConfig& output);
// --timeline, --report, --metrics-port (cli/resolve_records.cpp), after resolve_outputs.
void resolve_records(const LaunchInputs& in, const OutputConfig& output, RecordsConfig& records);
// --checkpoint-memory, --checkpoint-keep (cli/resolve_records.cpp).
void resolve_snapshots(const LaunchInputs& in, SnapshotConfig& snapshots);
// --numa-binding: each local rank's CPUs and memory node, from sysfs (cli/resolve_worker.cpp).
void resolve_numa(const LaunchInputs& in, const JobShape& shape, WorkerCommand& worker);

// --hosts/--hostfile: the hosts, ssh, the variables and options each host's agent gets
// (cli/resolve_hosts.cpp).
HostsLaunch resolve_hosts(const LaunchOptions& options,
                          const std::vector<std::string>& script_and_args, const EnvMap& env,
                          HostProbe& host);

// What each worker runs: the script, module or program, python, the role (cli/resolve_worker.cpp).
void resolve_worker(const LaunchInputs& in, const std::vector<std::string>& script_and_args,
                    WorkerCommand& worker);

// --framework and --tf-cluster, after the others: the contract, the store it needs, the
// combinations it refuses (cli/resolve_framework.cpp).
void resolve_framework(const LaunchInputs& in, LaunchConfig& cfg);
// --straggler, after the rendezvous (replace needs --spares): cli/resolve_straggler.cpp.
void resolve_straggler(const LaunchInputs& in, LaunchConfig& cfg);
// --preflight, after the framework: the probe's mode and interpreter (cli/resolve_preflight.cpp).
void resolve_preflight(const LaunchInputs& in, LaunchConfig& cfg);

}  // namespace npu_run
