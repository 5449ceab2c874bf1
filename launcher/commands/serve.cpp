#include <spdlog/spdlog.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/host_name.hpp>
#include <boost/asio/signal_set.hpp>
#include <csignal>

#include "agent/agent_log.hpp"
#include "commands/commands.hpp"
#include "rendezvous/server.hpp"

namespace npu_run {

int serve(const ServerCommand& command) {
  configure_agent_logging(command.log_level, boost::asio::ip::host_name(), std::nullopt);
  (void)std::signal(SIGPIPE, SIG_IGN);  // a closed console must not kill the server
  boost::asio::io_context io;
  rdzv::RendezvousServer server(io, command.settings, command.options);
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
    exit_code = 128 + sig;
    server.stop();
  });
  io.run();
  return exit_code;
}

}  // namespace npu_run
