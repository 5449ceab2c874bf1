// `npu_run rdzv-server`: the rendezvous server alone, on a host of its own. Its job options are
// the agents' own (cli/rendezvous_options.hpp), checked the same way.
#include <spdlog/spdlog.h>

#include <CLI/CLI.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/address.hpp>
#include <boost/asio/ip/host_name.hpp>
#include <boost/asio/signal_set.hpp>
#include <csignal>

#include "agent/agent_log.hpp"
#include "agent/shared_store.hpp"
#include "basics/descriptors.hpp"
#include "cli/host_probe.hpp"
#include "cli/rendezvous_options.hpp"
#include "cli/value_parsers.hpp"
#include "commands/commands.hpp"
#include "workers/console.hpp"

namespace npu_run {

namespace {

constexpr const char* kCommand = "npu_run rdzv-server";

class ServeOptions : public OptionTable {
 public:
  ServeOptions()
      : app_(
            "npu_run rdzv-server --port PORT --nnodes N [OPTIONS]\n\nRun the rendezvous server "
            "alone, on a host of its own; every agent then joins it with "
            "--master-addr/--master-port.",
            kCommand) {
    port = app_.add_option("--port,--master-port,--master_port", port_value, "Port to listen on")
               ->required();
    host = app_.add_option("--host", host_value,
                           "Address to listen on (default 0.0.0.0: every IPv4 address)");
    rdzv = add_rendezvous_options(app_, flags, names, "Rendezvous (as the agents')",
                                  RendezvousVariables::kTokenOnly);
    rdzv.nnodes->required();
    log_level =
        app_.add_option("--log-level,--log_level", level, "Log level")->type_name(kLogLevelChoices);
  }
  CLI::App& app() override { return app_; }

  CLI::App app_;
  OptionNames names;
  RendezvousFlags flags;
  RendezvousOptions rdzv;
  int port_value = 29500;
  std::string host_value = "0.0.0.0";
  std::string level = "info";
  CLI::Option *port, *host, *log_level;
};

ServerCommand resolve(const ServeOptions& o, const EnvMap& env) {
  ServerCommand cmd;
  if (o.port_value < 1 || o.port_value > 65535)
    throw UsageError(fmt::format("--port {}: a port must be between 1 and 65535", o.port_value));
  boost::system::error_code ec;
  boost::asio::ip::make_address(o.host_value, ec);
  if (ec) {
    throw UsageError(fmt::format(
        "--host '{}': expected an IP address of this host (or 0.0.0.0 / ::)", o.host_value));
  }
  const auto [min_nodes, max_nodes] = parse_nnodes(o.flags.nnodes, o.names.source(o.rdzv.nnodes));
  check_name(o.flags.run_id, o.names.source(o.rdzv.run_id), "a run id");
  const RendezvousTiming timing = resolve_timing(o.flags, o.rdzv, o.names);
  const auto host = real_host(env);
  const auto token = resolve_given_token(o.flags, o.rdzv, o.names, *host);
  cmd.settings = job_settings(o.flags.run_id, token ? token->value : "", min_nodes, max_nodes,
                              resolve_max_restarts(o.flags, o.rdzv, o.names), timing);
  cmd.options = server_options(o.host_value, o.port_value, timing);
  cmd.log_level = parse_log_level(o.level, "--log-level");
  return cmd;
}

}  // namespace

std::variant<ServerCommand, EarlyExit> parse_server_command(const std::vector<std::string>& args,
                                                            const EnvMap& env) {
  ServeOptions options;
  if (auto early = parse_options(options.app(), args, kCommand)) return *early;
  try {
    options.names.apply_environment(env);  // NPU_RUN_RDZV_TOKEN
  } catch (const CLI::ParseError& e) {
    return usage_error(e.what(), kCommand);
  }
  return resolve_or_exit([&] { return resolve(options, env); }, kCommand);
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
  rdzv::RendezvousServer server(io, command.settings, options);
  int exit_code = kExitRendezvous;
  server.start([&](const rdzv::Decision& decision) {
    exit_code = decision.exit_code;
    io.stop();
  });
  // Stopping the server makes every agent stop its workers and exit: the job ends.
  boost::asio::signal_set signals(io, SIGINT, SIGTERM, SIGHUP);
  signals.add(SIGQUIT);
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
