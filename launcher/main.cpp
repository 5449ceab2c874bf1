// npu_run entry point: parse, then either print the plan (--dry-run) or run the local agent.
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/host_name.hpp>
#include <csignal>
#include <cstdio>
#include <iostream>

#include "npu_run/agent_log.hpp"
#include "npu_run/command_line.hpp"
#include "npu_run/held_port.hpp"
#include "npu_run/local_agent.hpp"
#include "npu_run/plan_printer.hpp"
#include "npu_run/run_directory.hpp"
#include "npu_run/standalone_rendezvous.hpp"
#include "npu_run/usage_error.hpp"
#include "npu_run/worker_spec.hpp"
#include "workers/guardian.hpp"

namespace {

int usage_failure(const std::string& message) {
  std::cerr << "npu_run: error: " << message << "\n";
  return npu_run::kExitUsage;
}

int launch(const npu_run::LaunchConfig& cfg, const npu_run::EnvMap& env) {
  using namespace npu_run;
  const std::string host = boost::asio::ip::host_name();
  configure_agent_logging(cfg.log_level, host);
  if (cfg.max_nodes > 1) {
    return usage_failure(fmt::format(
        "--nnodes {}: multi-node jobs need the TCP rendezvous, which this build does "
        "not have yet; run one node (--nnodes 1)",
        cfg.min_nodes == cfg.max_nodes ? std::to_string(cfg.max_nodes)
                                       : fmt::format("{}:{}", cfg.min_nodes, cfg.max_nodes)));
  }
  require_local_address(cfg.master_addr, "--master-addr");

  if (cfg.dry_run) {
    const Assignment assignment = standalone_assignment(cfg, host, 0);
    const std::string run_dir = RunDirectory::preview(cfg, env);
    const AttemptLayout layout{run_dir, cfg.log_dir.has_value() || cfg.log_dir_is_temporary, 0};
    const auto specs = make_worker_specs(cfg, assignment, layout, env);
    std::cout << (cfg.json ? format_plan_json(cfg, assignment, specs, run_dir)
                           : format_plan_text(cfg, assignment, specs, run_dir));
    return 0;
  }

  // The guardian is forked first, while the agent is small and has no threads or sockets.
  Guardian guardian;
  // A closed console must not kill the agent mid-job; writes report EPIPE instead.
  std::signal(SIGPIPE, SIG_IGN);
  RunDirectory run_dir = RunDirectory::create(cfg, env);
  boost::asio::io_context io;
  StandaloneRendezvous rendezvous(io, cfg, host, lookup(env, "HCCL_IF_BASE_PORT").value_or(""));
  LocalAgent agent(io, cfg, rendezvous,
                   AgentContext{host, env, run_dir.path(), run_dir.log_files()}, &guardian);
  return agent.run();
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  const npu_run::EnvMap env = npu_run::current_environment();
  npu_run::ParseResult parsed = npu_run::parse_command_line(args, env);
  if (auto* early = std::get_if<npu_run::EarlyExit>(&parsed)) {
    (early->to_stderr ? std::cerr : std::cout) << early->text;
    return early->exit_code;
  }
  try {
    return launch(std::get<npu_run::LaunchConfig>(parsed), env);
  } catch (const npu_run::UsageError& e) {
    return usage_failure(e.what());
  } catch (const std::exception& e) {
    std::cerr << "npu_run: error: " << e.what() << "\n";
    return 1;
  }
}
