// Node 0 hosts the rendezvous: the agent with --node-rank 0, or, without --node-rank, whichever
// agent can bind --master-addr:--master-port on its own host; --rdzv-conf is_host=true|false
// overrides the node rank, as under torchrun's c10d backend. Anyone else (or node 0 when the
// port is already served, e.g. by `npu_run rdzv-server`) joins as a client. The server listens
// on every address the master name has on this host, and shares its port with the workers'
// store (--worker-store agent/tiered).
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "config/launch_config.hpp"
#include "rendezvous/server/server.hpp"
#include "store/store_server.hpp"

namespace boost::asio {
class io_context;
}

namespace npu_run {

// The server when this agent hosts the rendezvous, else null (the client then reports an
// unreachable or foreign master). Throws RendezvousConflict when --node-rank 0 finds the port
// served by another program, std::runtime_error when binding fails otherwise. `store` outlives
// the server.
std::unique_ptr<rdzv::RendezvousServer> host_rendezvous_if_node_0(boost::asio::io_context& io,
                                                                  const LaunchConfig& cfg,
                                                                  store::StoreServer& store);

// An etcd rendezvous' elected leader (agent/link/etcd_rendezvous.hpp) serves on its own address and
// the port it published, continuing the job from what the lost leader left (`resume`).
struct ElectedHost {
  std::string addr;
  int port = 0;
  std::optional<rdzv::JobMemory> resume;
  std::function<void(const rdzv::JobMemory&)> memory_changed;
};
// Throws std::runtime_error when it cannot bind.
std::unique_ptr<rdzv::RendezvousServer> host_elected_rendezvous(boost::asio::io_context& io,
                                                                const LaunchConfig& cfg,
                                                                store::StoreServer& store,
                                                                const ElectedHost& at);

}  // namespace npu_run
