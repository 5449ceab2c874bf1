#include "agent/link/rendezvous_host.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <chrono>
#include <map>
#include <optional>
#include <random>
#include <thread>

#include "agent/link/rendezvous_settings.hpp"
#include "agent/link/shared_store.hpp"
#include "basics/descriptors.hpp"
#include "basics/durations.hpp"
#include "basics/usage_error.hpp"
#include "cluster/node_ledger.hpp"
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
                                      const rdzv::JobSettings& settings,
                                      const rdzv::ServerOptions& options,
                                      const boost::asio::ip::tcp::endpoint& at) {
  std::mt19937 rng(std::random_device{}());
  for (int attempt = 0; attempt < kBindAttempts; ++attempt) {
    try {
      return std::make_unique<rdzv::RendezvousServer>(io, settings, options);
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

// The ledger's active entries, host -> what the refusal of its agents says.
std::map<std::string, std::string> ledgered_hosts(const LaunchConfig& cfg) {
  std::map<std::string, std::string> hosts;
  const auto& ledger = cfg.supervision.ledger;
  if (!ledger.path) return hosts;
  try {
    for (const LedgerEntry& e :
         active_entries(read_ledger(*ledger.path), wall_now_ms(), ledger.ttl.count()))
      hosts.emplace(e.host, describe(e));
  } catch (const std::runtime_error& e) {
    spdlog::warn("{}; no host is refused for it", e.what());
  }
  if (!hosts.empty()) {
    spdlog::info("the ledger of bad nodes {} has {} active entr{}: their agents are refused",
                 *ledger.path, hosts.size(), hosts.size() == 1 ? "y" : "ies");
  }
  return hosts;
}

// Every node the job takes out is appended to the ledger, when there is one.
void keep_ledger(const LaunchConfig& cfg, rdzv::ServerOptions& options) {
  if (!cfg.supervision.ledger.path) return;
  options.taken_out = [path = *cfg.supervision.ledger.path,
                       job = cfg.rendezvous.run_id](const rdzv::TakenOut& t) {
    try {
      append_to_ledger(path, LedgerEntry{t.host, t.addr, t.node_rank, t.time_ms, t.reason,
                                         t.evidence, job, false});
    } catch (const std::runtime_error& e) {
      spdlog::error("{}", e.what());
    }
  };
}

}  // namespace

std::unique_ptr<rdzv::RendezvousServer> host_rendezvous_if_node_0(boost::asio::io_context& io,
                                                                  const LaunchConfig& cfg,
                                                                  store::StoreServer& store) {
  const bool other_node = cfg.shape.node_rank && *cfg.shape.node_rank != 0;
  if (!cfg.rendezvous.is_host.value_or(!other_node)) return nullptr;
  // A name that failed to resolve for now: the client retries it, and reports it with its
  // timeout. One that does not exist, on the node given rank 0, is refused at once: that node
  // hosts the job at the name, and a single node is refused the same way.
  const net::ResolvedEndpoints resolved =
      net::resolve_endpoints(cfg.rendezvous.master_addr, cfg.rendezvous.master_port);
  if (resolved.not_found && cfg.shape.node_rank == 0) {
    throw UsageError(fmt::format(
        "--master-addr '{}': cannot resolve it ({}), and node 0 hosts the rendezvous there; give "
        "this node's IP address or a name it resolves (/etc/hosts or DNS)",
        cfg.rendezvous.master_addr, resolved.error));
  }
  // Thousands of agents need thousands of descriptors; the hard limit is what we may use.
  raise_open_files_limit();
  rdzv::JobSettings settings = job_settings(cfg);
  settings.ledger = ledgered_hosts(cfg);
  for (const auto& endpoint : resolved.endpoints) {
    rdzv::ServerOptions options = server_options(endpoint.address().to_string(),
                                                 cfg.rendezvous.master_port, cfg.rendezvous.timing);
    // Every address the name has on this host is served: a node may reach only one of them.
    for (const auto& other : resolved.endpoints)
      options.also_bind.push_back(other.address().to_string());
    if (npu_run_serves_store(cfg.rendezvous.worker_store)) share_port_with_store(options, store);
    keep_ledger(cfg, options);
    if (auto server = bind_with_retry(io, cfg, settings, options, endpoint))
      return std::move(*server);
  }
  return nullptr;  // --master-addr is another host, or its port stays taken: the client says so
}

std::unique_ptr<rdzv::RendezvousServer> host_elected_rendezvous(boost::asio::io_context& io,
                                                                const LaunchConfig& cfg,
                                                                store::StoreServer& store,
                                                                const ElectedHost& at) {
  raise_open_files_limit();
  rdzv::JobSettings settings = job_settings(cfg);
  settings.ledger = ledgered_hosts(cfg);
  rdzv::ServerOptions options = server_options(at.addr, at.port, cfg.rendezvous.timing);
  if (npu_run_serves_store(cfg.rendezvous.worker_store)) share_port_with_store(options, store);
  keep_ledger(cfg, options);
  options.resume = at.resume;
  options.memory_changed = at.memory_changed;
  try {
    return std::make_unique<rdzv::RendezvousServer>(io, settings, options);
  } catch (const rdzv::BindError& e) {
    throw std::runtime_error(e.what());
  }
}

}  // namespace npu_run
