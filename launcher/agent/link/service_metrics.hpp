// --metrics-port: what node 0's rendezvous server and workers' store, and each node's store
// proxy, add to the agent's metrics.
#pragma once

#include "agent/link/metrics_text.hpp"

namespace npu_run {

namespace rdzv {
class RendezvousServer;
class RendezvousState;
}  // namespace rdzv
namespace store {
class StoreServer;
class StoreProxy;
}  // namespace store

// The rendezvous: the round's nodes, agents waiting for a round, connections.
void write_rendezvous_metrics(MetricsText& out, const rdzv::RendezvousState& state,
                              size_t connections);
void write_rendezvous_metrics(MetricsText& out, const rdzv::RendezvousServer& server);
// The workers' store on node 0, and a node's proxy of it: requests and connections.
void write_store_metrics(MetricsText& out, const store::StoreServer& store);
void write_proxy_metrics(MetricsText& out, const store::StoreProxy& proxy);

}  // namespace npu_run
