// From the launch's configuration to the rendezvous' own types: the one translation between the
// config and rendezvous layers, used by the agents' adapters (local and TCP), by node 0's server
// and by `npu_run rdzv-server`.
#pragma once

#include <string>
#include <vector>

#include "basics/environment.hpp"
#include "basics/port_range.hpp"
#include "config/launch_config.hpp"
#include "etcd/client.hpp"
#include "rendezvous/client/client.hpp"
#include "rendezvous/server/server.hpp"
#include "rendezvous/state/state.hpp"

namespace npu_run {

// The token's value; "" for none. A DerivedToken must have been derived first (launch does,
// when the agent starts): it throws std::logic_error otherwise.
std::string token_value(const RendezvousToken& token);

// What the server's state machine needs to know of the job.
rdzv::JobSettings job_settings(const std::string& run_id, const std::string& token, int min_nodes,
                               int max_nodes, int max_restarts, const RendezvousTiming& timing);
rdzv::JobSettings job_settings(const LaunchConfig& cfg);

// What this node's workers run, as every node of one job must (rdzv::Join::command).
std::string job_command(const LaunchConfig& cfg);

// Where the server listens, and how it treats connections.
rdzv::ServerOptions server_options(const std::string& bind_addr, int port,
                                   const RendezvousTiming& timing);

// How an etcd rendezvous' agent reaches etcd. The TLS files are read here, once: one that is
// not what its key says is a UsageError naming it, before any request (a missing one was named
// by the command line's check).
etcd::Settings etcd_client_settings(const EtcdSettings& etcd);

// How an agent reaches the server on --master-addr:--master-port.
rdzv::ClientOptions client_options(const LaunchConfig& cfg);

// This node as the rendezvous sees it.
rdzv::NodeInfo this_node(const LaunchConfig& cfg, const std::string& host, const std::string& addr,
                         int worker_port);

// The ports the workers' MASTER_PORT must not be: HCCL's host ports (HCCL_IF_BASE_PORT in `env`)
// and the rendezvous port.
std::vector<PortRange> worker_ports_to_avoid(const EnvMap& env, int rendezvous_port);

// The join of this node: its info, --node-rank, and what every node must agree on.
// The node rank the join claims: --node-rank, or the scheduler's unless the job orders nodes by
// their place (rendezvous/state/node_order.hpp).
std::optional<int> claimed_node_rank(const LaunchConfig& cfg);
rdzv::Join join_message(const LaunchConfig& cfg, rdzv::NodeInfo node);

}  // namespace npu_run
