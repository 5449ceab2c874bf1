// npu_run entry point: parse the command line, then run the chosen command.
#include <cstring>
#include <iostream>
#include <string_view>

#include "basics/descriptors.hpp"
#include "basics/usage_error.hpp"
#include "commands/commands.hpp"
#include "commands/static_runtime.hpp"

namespace {

// `--rdzv-token SECRET` would show in `ps` for as long as the agent runs. The arguments were copied
// into `args` before parsing, so the originals (what /proc/PID/cmdline shows) can be blanked.
// Workers never see them: their command lines are built from the parsed copy.
void hide_token_arguments(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    for (const std::string_view flag : {"--rdzv-token", "--rdzv_token"}) {
      if (arg == flag && i + 1 < argc) {
        std::memset(argv[i + 1], '*', std::strlen(argv[i + 1]));
      } else if (arg.size() > flag.size() &&
                 arg.substr(0, flag.size() + 1) == std::string(flag) + "=") {
        std::memset(argv[i] + flag.size() + 1, '*', arg.size() - flag.size() - 1);
      }
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  npu_run::prepare_static_runtime();
  npu_run::fill_closed_standard_descriptors();
  // Whatever npu_run inherited (a scheduler's or a shell's descriptors) must not reach the
  // workers, on any kernel: the children's close_range is missing before Linux 5.9.
  npu_run::set_cloexec_from(3);
  std::vector<std::string> args(argv + 1, argv + argc);
  hide_token_arguments(argc, argv);
  const npu_run::EnvMap env = npu_run::current_environment();
  if (!args.empty()) {
    // What `npu_run --hosts` runs on each host over ssh; not for users, so not in --help.
    if (args.front() == "host-agent")
      return npu_run::host_agent({args.begin() + 1, args.end()}, env);
    for (const npu_run::Subcommand& sub : npu_run::subcommands()) {
      if (args.front() == sub.name) return sub.run({args.begin() + 1, args.end()}, env);
    }
  }
  const npu_run::ParseResult parsed = npu_run::parse_command_line(args, env);
  if (const auto* early = std::get_if<npu_run::EarlyExit>(&parsed))
    return npu_run::report_early_exit(*early);
  if (const auto* hosts = std::get_if<npu_run::ParsedHosts>(&parsed)) {
    return npu_run::run_guarded([&] { return npu_run::launch_on_hosts(hosts->launch); });
  }
  return npu_run::run_guarded(
      [&] { return npu_run::launch(std::get<npu_run::ParsedLaunch>(parsed), env); });
}
