// The workers' store on the rendezvous port (--worker-store agent): whoever hosts the rendezvous
// (node 0's agent, or `npu_run rdzv-server`) serves torch's TCPStore there too, as torchrun 2.x
// shares its agent's store with the workers on the master port.
#pragma once

#include "rendezvous/server/server.hpp"
#include "store/store_server.hpp"

namespace npu_run {

// Connections on the port that are not rendezvous frames go to `store` (from this host and the
// job's nodes only), and each round that forms starts the store afresh: the workers of a
// restart must not see the last attempt's keys (gloo's addresses, barrier counts). `store`
// outlives the server.
void share_port_with_store(rdzv::ServerOptions& options, store::StoreServer& store);

}  // namespace npu_run
