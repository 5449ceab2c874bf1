// `npu_run [OPTIONS] SCRIPT ...`: this node's agent, and on node 0 of a multi-node job the
// rendezvous server beside it (agent/link/rendezvous_host.hpp), run until both are done
// (agent/node_run.hpp). This file wires them: the process-wide setup (guardian, subreaper,
// SIGPIPE, the console), the objects in the order their lifetimes need, and the exit status.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/host_name.hpp>
#include <csignal>
#include <cstring>
#include <iostream>

#include "agent/health/topology_probe.hpp"
#include "agent/link/job_token.hpp"
#include "agent/link/rendezvous.hpp"
#include "agent/link/rendezvous_host.hpp"
#include "agent/link/rendezvous_settings.hpp"
#include "agent/link/service_metrics.hpp"
#include "agent/local_agent.hpp"
#include "agent/node_run.hpp"
#include "agent/plan_printer.hpp"
#include "agent/records/agent_log.hpp"
#include "agent/records/job_records.hpp"
#include "agent/records/run_directory.hpp"
#include "basics/kernel_features.hpp"
#include "commands/commands.hpp"
#include "net/address_probe.hpp"
#include "net/held_port.hpp"
#include "rendezvous/state/state.hpp"
#include "workers/child_exits.hpp"
#include "workers/console.hpp"
#include "workers/escaped_processes.hpp"
#include "workers/guardian.hpp"
#include "workers/terminal_input.hpp"

namespace npu_run {

namespace {

namespace asio = boost::asio;

void log_launch_facts(const LaunchConfig& cfg, const ClusterFacts& facts) {
  spdlog::debug("kernel {}: worker exits observed through {}", describe_kernel(kernel_features()),
                to_string(ChildExits::preferred()));
  if (!facts.description.empty()) {
    spdlog::info("{}{}{}", facts.description, facts.detected.empty() ? "" : ": ",
                 fmt::join(facts.detected, "; "));
  }
  for (const auto& warning : facts.warnings) spdlog::warn("{}", warning);
  for (const std::string& note : cfg.worker.accepted_notes) spdlog::info("{}", note);
  // Where the token came from, never the token itself.
  if (cfg.shape.multi_node() && !token_source(cfg.rendezvous.token).empty())
    spdlog::info("rendezvous token: {}", token_source(cfg.rendezvous.token));
}

// What only this process does, before the agent: the guardian is forked first, while the agent
// is small and has no threads or sockets; orphaned descendants of the workers (a daemon's double
// fork) become the agent's children, so that they can be found and stopped with the attempt
// (workers/escaped_processes.hpp); a closed console must not kill the agent mid-job, writes
// report EPIPE instead.
void prepare_process() {
  if (!become_child_subreaper())
    spdlog::debug("cannot become the child subreaper: {}", std::strerror(errno));
  (void)std::signal(SIGPIPE, SIG_IGN);
}

// Node 0 (or whichever agent decides the job) leaves its timeline and report at the end, and
// with --metrics-port serves its rendezvous server's and store's metrics beside the agent's (an
// etcd leader's server comes through its rendezvous, a single node's store through the local
// one). `server` and `store` outlive the agent.
void keep_records(const LaunchConfig& cfg, const std::string& run_dir,
                  rdzv::RendezvousServer* server, Rendezvous& rendezvous, store::StoreServer& store,
                  AgentContext& context) {
  auto write_records = [paths = job_record_paths(cfg, run_dir)](
                           const rdzv::RendezvousState& state) { write_job_records(paths, state); };
  if (server) server->on_job_ended(write_records);
  rendezvous.on_job_ended(write_records);
  if (cfg.records.metrics_port == 0) return;
  if (server) {
    context.metrics_sources.emplace_back(
        [server](MetricsText& out) { write_rendezvous_metrics(out, *server); });
  }
  if (server || cfg.rendezvous.etcd) {
    context.metrics_sources.emplace_back(
        [&store](MetricsText& out) { write_store_metrics(out, store); });
  }
}

}  // namespace

int launch(const ParsedLaunch& parsed, const EnvMap& env, const LaunchHooks& hooks) {
  LaunchConfig cfg = with_derived_token(parsed.config);
  const std::string host = asio::ip::host_name();
  configure_agent_logging(cfg.agent.log_level, host, cfg.shape.node_rank);
  log_launch_facts(cfg, parsed.cluster);
  // Before the first join, which carries it: where this node sits orders the job's ranks.
  if (cfg.shape.multi_node() || cfg.rendezvous.etcd) {
    cfg.placement.path = find_topology(cfg, env, host);
    if (!cfg.placement.path.empty())
      spdlog::info("this node's place in the network: {}", cfg.placement.path.describe());
  }
  if (cfg.agent.dry_run) {
    std::cout << format_plan(cfg, env, host);
    return 0;
  }
  require_open_files(cfg.shape.nproc_per_node);
  if (!cfg.shape.multi_node() && !cfg.rendezvous.etcd)
    net::require_local_address(cfg.rendezvous.master_addr, "--master-addr");

  Guardian guardian;
  prepare_process();
  RunDirectory run_dir = RunDirectory::create(cfg, env);
  asio::io_context io;
  // While the loop runs, the console is written by a thread of its own: heartbeats, signals and
  // exits never wait for a reader that stopped reading. Lives shorter than `io`, which the
  // console posts to, and longer than the agent, whose relays write to it.
  const QueuedConsole console;
  // What is typed reaches local rank 0 (pdb, breakpoint()); Ctrl-C stays the agent's.
  const TerminalInput terminal_input(io);
  const std::vector<PortRange> avoid = worker_ports_to_avoid(env, cfg.rendezvous.master_port);
  // Node 0's workers' store (--worker-store agent), served on the rendezvous port; declared
  // before the server, which hands it connections, so that it is destroyed after it.
  store::StoreServer store(io);
  std::unique_ptr<rdzv::RendezvousServer> server;
  std::unique_ptr<Rendezvous> rendezvous;
  if (cfg.rendezvous.etcd) {
    rendezvous = etcd_rendezvous(io, cfg, host, avoid, store);  // hosts a server if elected
  } else if (cfg.shape.multi_node()) {
    server = host_rendezvous_if_node_0(io, cfg, store);
    rendezvous = tcp_rendezvous(io, cfg, host, avoid);
  } else {
    rendezvous = local_rendezvous(io, cfg, host, avoid);
  }
  AgentContext context{host, env, run_dir.path(), run_dir.log_files(), server != nullptr, {}};
  keep_records(cfg, run_dir.path(), server.get(), *rendezvous, store, context);
  LocalAgent agent(io, cfg, *rendezvous, std::move(context), &guardian);
  const int exit_code = run_node(io, agent, server.get(), *rendezvous, cfg, hooks);
  // The code itself, in the log: under Slurm or in a pod, the job's output is often all a user
  // has, and the scheduler's record of the code is easily lost (requeue, no accounting).
  if (exit_code != 0) spdlog::info("exit status {}", exit_code);
  return exit_code;
}

}  // namespace npu_run
