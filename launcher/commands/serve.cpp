// `npu_run rdzv-server`: the rendezvous server alone, on a host of its own. Its job options are
// the agents' own (cli/rendezvous_options.hpp), checked the same way.
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/address.hpp>
#include <boost/asio/ip/host_name.hpp>
#include <boost/asio/signal_set.hpp>
#include <csignal>

#include "agent/link/shared_store.hpp"
#include "agent/records/agent_log.hpp"
#include "basics/descriptors.hpp"
#include "cli/host_probe.hpp"
#include "cli/rendezvous_options.hpp"
#include "cli/value_parsers.hpp"
#include "commands/commands.hpp"
#include "workers/console.hpp"

namespace npu_run {

namespace {

constexpr const char* kServeCommand = "npu_run rdzv-server";

std::unique_ptr<CLI::App> serve_app() {
  return std::make_unique<CLI::App>(
      "npu_run rdzv-server --port PORT --nnodes N [OPTIONS]\n\nRun the rendezvous server alone, "
      "on a host of its own; every agent then joins it with --master-addr/--master-port.",
      kServeCommand);
}

class ServeOptions : public OptionTable, public OptionSet {
 public:
  ServeOptions() : OptionSet(serve_app()) {
    server.port.option()->required();
    rdzv.nnodes.option()->required();
  }
  CLI::App& app() override { return OptionSet::app(); }

  ServerFlags server{*this};
  RendezvousFlags rdzv{*this, "Rendezvous (as the agents')", false};
};

ServerCommand resolve(ServeOptions& o, const EnvMap& env) {
  try {
    o.names().apply_environment(env);  // NPU_RUN_RDZV_TOKEN
  } catch (const CLI::ParseError& e) {
    throw UsageError(e.what());
  }
  ServerCommand cmd;
  const int port = *o.server.port;
  if (port < 1 || port > 65535)
    throw UsageError(fmt::format("--port {}: a port must be between 1 and 65535", port));
  const std::string& address = *o.server.host;
  boost::system::error_code ec;
  boost::asio::ip::make_address(address, ec);
  if (ec) {
    throw UsageError(
        fmt::format("--host '{}': expected an IP address of this host (or 0.0.0.0 / ::)", address));
  }
  const auto [min_nodes, max_nodes] = parse_nnodes(*o.rdzv.nnodes, o.rdzv.nnodes.source());
  check_name(*o.rdzv.run_id, o.rdzv.run_id.source(), "a run id");
  const RendezvousTiming timing = resolve_timing(o.rdzv);
  const auto host = real_host(env);
  const auto token = resolve_given_token(o.rdzv, *host);
  cmd.settings = job_settings(*o.rdzv.run_id, token ? token->value : "", min_nodes, max_nodes,
                              resolve_max_restarts(o.rdzv), timing);
  cmd.options = server_options(address, port, timing);
  cmd.log_level = parse_log_level(*o.server.log_level, "--log-level");
  return cmd;
}

}  // namespace

std::variant<ServerCommand, EarlyExit> parse_server_command(const std::vector<std::string>& args,
                                                            const EnvMap& env) {
  return parse_subcommand<ServeOptions>(
      args, kServeCommand, [&](ServeOptions& options) { return resolve(options, env); });
}

int serve(const ServerCommand& command) {
  configure_agent_logging(command.log_level, boost::asio::ip::host_name(), std::nullopt);
  (void)std::signal(SIGPIPE, SIG_IGN);  // a closed console must not kill the server
  raise_open_files_limit();             // one descriptor per agent
  boost::asio::io_context io;
  const QueuedConsole console;  // a console that stops reading must not stop the server
  // The workers' store on the same port: agents in the default --worker-store agent mode send
  // their workers here.
  store::StoreServer store(io);
  rdzv::ServerOptions options = command.options;
  share_port_with_store(options, store);
  // The stop signals are caught before the server says it is up: one sent as soon as that line
  // appears waits in the set for the handler below, never meets the default action or nothing.
  boost::asio::signal_set signals(io, SIGINT, SIGTERM, SIGHUP);
  signals.add(SIGQUIT);
  rdzv::RendezvousServer server(io, command.settings, options);
  int exit_code = kExitRendezvous;
  server.start([&](const rdzv::Decision& decision) {
    exit_code = decision.exit_code;
    io.stop();
  });
  // Stopping the server makes every agent stop its workers and exit: the job ends.
  signals.async_wait([&](boost::system::error_code ec, int sig) {
    if (ec) return;
    spdlog::warn("received signal {}: closing the rendezvous; every agent will stop its workers",
                 sig);
    exit_code = exit_for_signal(sig);
    server.stop();
  });
  io.run();
  return exit_code;
}

std::unique_ptr<OptionTable> serve_options() {
  return std::make_unique<ServeOptions>();
}

}  // namespace npu_run
