#include "agent/rendezvous_host.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <optional>
#include <random>
#include <thread>

#include "agent/rendezvous_settings.hpp"
#include "agent/shared_store.hpp"
#include "basics/descriptors.hpp"
#include "basics/usage_error.hpp"
#include "net/address_probe.hpp"

namespace npu_run {

namespace {

// "Address in use" with nobody accepting there is a clash that passes (two agents of one host
// binding at the same moment, a socket on its way out): tried again shortly, so that exactly one
// agent ends up serving instead of all of them waiting for a server.
constexpr int kBindAttempts = 20;

// Told it is node 0, this agent is the job's host: whoever serves the port is another job (or a
// leftover), and joining it would mix two jobs into one.
[[noreturn]] void refuse_foreign_server(const rdzv::ServerOptions& options) {
  throw RendezvousConflict(fmt::format(
      "--node-rank 0 hosts the job's rendezvous, but {}:{} is already served by another program "
      "(another job's npu_run?); give this job its own --master-port, stop the other one, or, "
      "to join a server started with `npu_run rdzv-server`, add --rdzv-conf is_host=false",
      options.bind_addr, options.port));
}

using Server = std::unique_ptr<rdzv::RendezvousServer>;

// The server on `at`, or null when another program serves it already; nothing when the next
// address is to be tried (this one is not this host's, or stays taken with nobody accepting).
std::optional<Server> bind_with_retry(boost::asio::io_context& io, const LaunchConfig& cfg,
                                      const rdzv::ServerOptions& options,
                                      const boost::asio::ip::tcp::endpoint& at) {
  std::mt19937 rng(std::random_device{}());
  for (int attempt = 0; attempt < kBindAttempts; ++attempt) {
    try {
      return std::make_unique<rdzv::RendezvousServer>(io, job_settings(cfg), options);
    } catch (const rdzv::BindError& e) {
      if (e.address_not_local) return std::nullopt;
      if (!e.address_in_use) throw std::runtime_error(e.what());
      if (net::someone_listens(at)) {
        if (cfg.shape.node_rank == 0 && !cfg.rendezvous.is_host) refuse_foreign_server(options);
        spdlog::info("{}:{} is already served here; joining it as a client", options.bind_addr,
                     options.port);
        return Server();
      }
      std::this_thread::sleep_for(
          std::chrono::milliseconds(std::uniform_int_distribution<int>(5, 50)(rng)));
    }
  }
  spdlog::warn(
      "cannot host the rendezvous on {}:{}: the port is in use, but nothing accepts connections "
      "there; free it or choose another --master-port",
      options.bind_addr, options.port);
  return std::nullopt;
}

}  // namespace

std::unique_ptr<rdzv::RendezvousServer> host_rendezvous_if_node_0(boost::asio::io_context& io,
                                                                  const LaunchConfig& cfg,
                                                                  store::StoreServer& store) {
  const bool other_node = cfg.shape.node_rank && *cfg.shape.node_rank != 0;
  if (!cfg.rendezvous.is_host.value_or(!other_node)) return nullptr;
  // An unresolvable name: the client reports it, with its timeout.
  const net::ResolvedEndpoints resolved =
      net::resolve_endpoints(cfg.rendezvous.master_addr, cfg.rendezvous.master_port);
  // Thousands of agents need thousands of descriptors; the hard limit is what we may use.
  raise_open_files_limit();
  for (const auto& endpoint : resolved.endpoints) {
    rdzv::ServerOptions options = server_options(endpoint.address().to_string(),
                                                 cfg.rendezvous.master_port, cfg.rendezvous.timing);
    // Every address the name has on this host is served: a node may reach only one of them.
    for (const auto& other : resolved.endpoints)
      options.also_bind.push_back(other.address().to_string());
    if (npu_run_serves_store(cfg.rendezvous.worker_store)) share_port_with_store(options, store);
    if (auto server = bind_with_retry(io, cfg, options, endpoint)) return std::move(*server);
  }
  return nullptr;  // --master-addr is another host, or its port stays taken: the client says so
}

}  // namespace npu_run
