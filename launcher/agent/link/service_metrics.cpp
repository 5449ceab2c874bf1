#include "agent/link/service_metrics.hpp"

#include "rendezvous/server/server.hpp"
#include "store/store_proxy.hpp"
#include "store/store_server.hpp"

namespace npu_run {

void write_rendezvous_metrics(MetricsText& out, const rdzv::RendezvousState& state,
                              size_t connections) {
  out.gauge("npu_run_rendezvous_members", "Nodes of the round the rendezvous formed last",
            static_cast<double>(state.members()));
  out.gauge("npu_run_rendezvous_waiting", "Agents joined and waiting for the next round",
            static_cast<double>(state.joined()));
  out.gauge("npu_run_rendezvous_round", "The job's round", static_cast<double>(state.round()));
  out.gauge("npu_run_rendezvous_connections", "Connections to the rendezvous",
            static_cast<double>(connections));
  // --straggler: the node (a one-node job: the rank) named and still slow; 0 samples: none.
  if (const auto s = state.straggler_status()) {
    const MetricsText::Labels labels{{"node_rank", std::to_string(s->node_rank)},
                                     {"rank", std::to_string(s->rank)},
                                     {"host", s->host}};
    out.gauge("npu_run_straggler",
              "Share of the time the straggler's peers waited for it in collectives", s->share,
              labels);
    out.gauge("npu_run_straggler_cost_seconds",
              "What the straggler cost its peers over the windows that named it",
              static_cast<double>(s->cost_ms) / 1000.0, labels);
  }
}

void write_rendezvous_metrics(MetricsText& out, const rdzv::RendezvousServer& server) {
  write_rendezvous_metrics(out, server.state(), server.connections());
}

void write_store_metrics(MetricsText& out, const store::StoreServer& store) {
  out.counter("npu_run_store_requests_total", "Requests the workers' store (node 0) served",
              static_cast<double>(store.requests()));
  out.gauge("npu_run_store_connections", "Connections to the workers' store (node 0)",
            static_cast<double>(store.connections()));
}

void write_proxy_metrics(MetricsText& out, const store::StoreProxy& proxy) {
  // Names of their own: node 0 may run a proxy beside the store, and a family's samples must
  // stay together.
  out.counter("npu_run_proxy_requests_total", "Requests this node's workers sent its store proxy",
              static_cast<double>(proxy.counters().client_requests));
  out.gauge("npu_run_proxy_connections", "Connections to this node's store proxy",
            static_cast<double>(proxy.connections()));
  out.counter("npu_run_proxy_upstream_requests_total",
              "Requests this node's proxy sent on to node 0's store",
              static_cast<double>(proxy.counters().upstream_requests));
}

}  // namespace npu_run
