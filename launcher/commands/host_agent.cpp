// `npu_run host-agent --name HOST -- AGENT OPTIONS... SCRIPT ARGS`: what the launching npu_run's
// ssh runs on each host (remote/ssh_command.cpp writes the command line). It says hello, reads
// the preamble from stdin (remote/launcher_link.hpp), then runs the host's agent as `npu_run`
// would, with stdin as the launcher's control channel. It ends with a control line giving the
// agent's exit status.
#include <iostream>
#include <memory>

#include "basics/exit_status.hpp"
#include "commands/commands.hpp"
#include "remote/launcher_link.hpp"

namespace npu_run {

int host_agent(const std::vector<std::string>& args, const EnvMap& env) {
  if (args.size() < 3 || args[0] != "--name" || args[2] != "--") {
    std::cerr << "npu_run host-agent: started by `npu_run --hosts` over ssh, not by hand\n";
    return kExitUsage;
  }
  const std::string& name = args[1];
  std::unique_ptr<LauncherLink> link;
  try {
    link = std::make_unique<LauncherLink>(name);
  } catch (const std::exception& e) {
    std::cerr << "npu_run host-agent on " << name << ": " << e.what() << "\n";
    return kExitUsage;
  }
  const EnvMap agent_env = link->agent_env(env);
  const ParseResult parsed =
      parse_command_line(std::vector<std::string>(args.begin() + 3, args.end()), agent_env);
  if (const auto* early = std::get_if<EarlyExit>(&parsed)) return report_early_exit(*early);
  if (!std::holds_alternative<ParsedLaunch>(parsed)) {
    std::cerr << "npu_run host-agent on " << name << ": --hosts/--hostfile reached a host\n";
    return kExitUsage;
  }
  link->say_ready();
  const LaunchHooks hooks{
      [&link](boost::asio::io_context& io, const LaunchHooks::StopAgent& stop,
              const std::function<void()>& done) { return link->attach(io, stop, done); }};
  const int code =
      run_guarded([&] { return launch(std::get<ParsedLaunch>(parsed), agent_env, hooks); });
  link->say_exit(code);
  return code;
}

}  // namespace npu_run
