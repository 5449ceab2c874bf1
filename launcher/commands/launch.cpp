#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/host_name.hpp>
#include <boost/asio/steady_timer.hpp>
#include <csignal>
#include <cstring>
#include <iostream>
#include <random>
#include <thread>

#include "agent/agent_log.hpp"
#include "agent/assignment.hpp"
#include "agent/job_token.hpp"
#include "agent/local_agent.hpp"
#include "agent/local_rendezvous.hpp"
#include "agent/plan_printer.hpp"
#include "agent/rendezvous_settings.hpp"
#include "agent/run_directory.hpp"
#include "agent/shared_store.hpp"
#include "agent/tcp_rendezvous.hpp"
#include "agent/worker_plan.hpp"
#include "basics/descriptors.hpp"
#include "basics/kernel_features.hpp"
#include "basics/token_file.hpp"
#include "commands/commands.hpp"
#include "net/address_probe.hpp"
#include "net/held_port.hpp"
#include "rendezvous/server.hpp"
#include "workers/child_exits.hpp"
#include "workers/console.hpp"
#include "workers/escaped_processes.hpp"
#include "workers/guardian.hpp"
#include "workers/terminal_input.hpp"

namespace npu_run {

namespace {

namespace asio = boost::asio;

int print_plan(const LaunchConfig& cfg, const EnvMap& env, const std::string& host) {
  const Assignment assignment = planned_assignment(cfg, host);
  const std::string run_dir = RunDirectory::preview(cfg, env);
  const AttemptLayout layout{run_dir,
                             cfg.output.log_dir.has_value() || cfg.output.log_dir_is_temporary, 0};
  const auto specs = make_worker_specs(cfg, assignment, layout, env);
  std::cout << (cfg.agent.json ? format_plan_json(cfg, assignment, specs, run_dir)
                               : format_plan_text(cfg, assignment, specs, run_dir));
  return 0;
}

// Node 0 hosts the rendezvous server: the agent with --node-rank 0, or, without --node-rank,
// whichever agent can bind --master-addr:--master-port on its own host. Anyone else (or node 0
// when the port is already served, e.g. by `npu_run rdzv-server`) joins as a client.
// --rdzv-conf is_host=true|false overrides the node rank, as under torchrun's c10d backend.
std::unique_ptr<rdzv::RendezvousServer> host_server_if_node_0(asio::io_context& io,
                                                              const LaunchConfig& cfg,
                                                              store::StoreServer& store) {
  const bool other_node = cfg.shape.node_rank && *cfg.shape.node_rank != 0;
  if (cfg.rendezvous.is_host.value_or(!other_node) == false) return nullptr;
  const ResolvedEndpoints resolved =
      resolve_endpoints(cfg.rendezvous.master_addr, cfg.rendezvous.master_port);
  // Thousands of agents need thousands of descriptors; the hard limit is what we may use.
  raise_open_files_limit();
  // An unresolvable name: the client reports it, with its timeout.
  std::mt19937 rng(std::random_device{}());
  for (const auto& endpoint : resolved.endpoints) {
    rdzv::ServerOptions options = server_options(endpoint.address().to_string(),
                                                 cfg.rendezvous.master_port, cfg.rendezvous.timing);
    // Every address the name has on this host is served: a node may reach only one of them.
    for (const auto& other : resolved.endpoints)
      options.also_bind.push_back(other.address().to_string());
    if (npu_run_serves_store(cfg.rendezvous.worker_store)) share_port_with_store(options, store);
    // "Address in use" with nobody accepting there is a clash that passes (two agents of one
    // host binding at the same moment, a socket on its way out): try again shortly, so that
    // exactly one agent ends up serving instead of all of them waiting for a server.
    for (int attempt = 0; attempt < 20; ++attempt) {
      try {
        return std::make_unique<rdzv::RendezvousServer>(io, job_settings(cfg), options);
      } catch (const rdzv::BindError& e) {
        if (e.address_not_local) break;
        if (!e.address_in_use) throw std::runtime_error(e.what());
        if (someone_listens(endpoint)) {
          // Told it is node 0, this agent is the job's host: whoever serves the port is another
          // job (or a leftover), and joining it would mix two jobs into one.
          if (cfg.shape.node_rank == 0 && !cfg.rendezvous.is_host) {
            throw RendezvousConflict(fmt::format(
                "--node-rank 0 hosts the job's rendezvous, but {}:{} is already served by "
                "another program (another job's npu_run?); give this job its own --master-port, "
                "stop the other one, or, to join a server started with `npu_run rdzv-server`, "
                "add --rdzv-conf is_host=false",
                options.bind_addr, options.port));
          }
          spdlog::info("{}:{} is already served here; joining it as a client", options.bind_addr,
                       options.port);
          return nullptr;
        }
        std::this_thread::sleep_for(
            std::chrono::milliseconds(std::uniform_int_distribution<int>(5, 50)(rng)));
        if (attempt == 19) {
          spdlog::warn(
              "cannot host the rendezvous on {}:{}: the port is in use, but nothing accepts "
              "connections there; free it or choose another --master-port",
              options.bind_addr, options.port);
        }
      }
    }
  }
  return nullptr;  // --master-addr is another host, or its port stays taken: the client says so
}

// Each worker takes a few descriptors in the agent (its output pipes, pidfd and exec report,
// more while it starts), the agent a few dozen of its own. With fewer, a socket or a pipe fails
// later under a misleading name ("not an address of this host"): say it now, before anything.
void require_open_files(int nproc) {
  const auto needed = 64 + 16 * static_cast<unsigned long>(nproc);
  if (const unsigned long limit = ensure_open_files(needed); limit != 0) {
    throw UsageError(fmt::format(
        "the open-files limit (ulimit -n) is {}, but an agent with {} worker{} needs at least {} "
        "(EMFILE otherwise); raise it: ulimit -n {} in the shell, LimitNOFILE= in a systemd "
        "unit, nofile in /etc/security/limits.conf",
        limit, nproc, nproc == 1 ? "" : "s", needed, std::max<unsigned long>(needed, 1024)));
  }
}

// The Slurm step's token is derived only now, when an agent really starts: reading the
// command line (and --dry-run) creates no files.
LaunchConfig with_derived_token(LaunchConfig cfg) {
  if (const auto* derived = std::get_if<DerivedToken>(&cfg.rendezvous.token);
      derived != nullptr && !cfg.agent.dry_run) {
    cfg.rendezvous.token =
        GivenToken{derive_job_token(derived->secret_path, derived->job), derived->source};
  }
  return cfg;
}

void log_cluster_facts(const ClusterFacts& facts) {
  if (!facts.description.empty()) {
    spdlog::info("{}{}{}", facts.description, facts.detected.empty() ? "" : ": ",
                 fmt::join(facts.detected, "; "));
  }
  for (const auto& warning : facts.warnings) spdlog::warn("{}", warning);
}

// Runs the agent, and node 0's server beside it, until both are done: the server outlives the
// agent while the other nodes still have to stop and hear the decision. Returns the agent's code.
int run_until_done(asio::io_context& io, LocalAgent& agent, rdzv::RendezvousServer* server,
                   const LaunchConfig& cfg, const LaunchHooks& hooks) {
  int exit_code = 1;
  bool agent_done = false;
  bool server_done = server == nullptr;
  bool hooks_done = !hooks.attach;
  asio::steady_timer server_grace(io);
  auto stop_when_both_done = [&] {
    if (agent_done && server_done && hooks_done) io.stop();
  };
  std::shared_ptr<void> attached;
  if (hooks.attach) {
    attached = hooks.attach(
        io, [&agent](int sig, const std::string& why) { agent.stop(sig, why); },
        [&] {
          hooks_done = true;
          stop_when_both_done();
        });
  }
  if (server != nullptr) {
    server->start([&](const rdzv::Decision&) {
      server_done = true;
      stop_when_both_done();
    });
  }
  agent.start([&](int code) {
    exit_code = code;
    agent_done = true;
    if (server != nullptr && !server_done && !server->job_finished()) {
      if (server->round_in_progress()) {
        // This node has reported; the others still have to stop and hear the decision.
        server_grace.expires_after(cfg.supervision.term_timeout +
                                   cfg.rendezvous.timing.exit_barrier_timeout);
        server_grace.async_wait([&](boost::system::error_code ec) {
          if (!ec) server->stop();
        });
      } else {
        server->stop();  // no round runs: there is nothing to finish for anyone
      }
    }
    stop_when_both_done();
  });
  io.run();
  attached.reset();  // before the loop it uses goes
  return exit_code;
}

}  // namespace

int launch(const ParsedLaunch& parsed, const EnvMap& env, const LaunchHooks& hooks) {
  const LaunchConfig cfg = with_derived_token(parsed.config);
  const std::string host = asio::ip::host_name();
  configure_agent_logging(cfg.agent.log_level, host, cfg.shape.node_rank);
  spdlog::debug("kernel {}: worker exits observed through {}", describe_kernel(kernel_features()),
                to_string(ChildExits::preferred()));
  log_cluster_facts(parsed.cluster);
  for (const std::string& note : cfg.worker.accepted_notes) spdlog::info("{}", note);
  // Where the token came from, never the token itself.
  if (cfg.shape.multi_node() && !token_source(cfg.rendezvous.token).empty())
    spdlog::info("rendezvous token: {}", token_source(cfg.rendezvous.token));
  if (cfg.agent.dry_run) return print_plan(cfg, env, host);
  require_open_files(cfg.shape.nproc_per_node);
  if (!cfg.shape.multi_node()) require_local_address(cfg.rendezvous.master_addr, "--master-addr");

  // The guardian is forked first, while the agent is small and has no threads or sockets.
  Guardian guardian;
  // Orphaned descendants of the workers (a daemon's double fork) become the agent's children,
  // so that they can be found and stopped with the attempt (workers/escaped_processes.hpp).
  if (!become_child_subreaper())
    spdlog::debug("cannot become the child subreaper: {}", std::strerror(errno));
  // A closed console must not kill the agent mid-job; writes report EPIPE instead.
  (void)std::signal(SIGPIPE, SIG_IGN);
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
  if (cfg.shape.multi_node()) {
    server = host_server_if_node_0(io, cfg, store);
    rendezvous = std::make_unique<TcpRendezvous>(io, cfg, host, avoid);
  } else {
    rendezvous = std::make_unique<LocalRendezvous>(io, cfg, host, avoid);
  }
  LocalAgent agent(
      io, cfg, *rendezvous,
      AgentContext{host, env, run_dir.path(), run_dir.log_files(), server != nullptr, {}},
      &guardian);

  const int exit_code = run_until_done(io, agent, server.get(), cfg, hooks);
  // The code itself, in the log: under Slurm or in a pod, the job's output is often all a user
  // has, and the scheduler's record of the code is easily lost (requeue, no accounting).
  if (exit_code != 0) spdlog::info("exit status {}", exit_code);
  return exit_code;
}

}  // namespace npu_run
