// npu_run entry point: parse the command line, then run the chosen command.
#include <cstring>
#include <iostream>
#include <string_view>

#include "commands/commands.hpp"
#include "commands/static_runtime.hpp"
#include "npu_run/usage_error.hpp"
#include "workers/descriptors.hpp"

namespace {

int report_early_exit(const npu_run::EarlyExit& early) {
  (early.to_stderr ? std::cerr : std::cout)
      << (early.version ? npu_run::version_report() : early.text);
  return early.exit_code;
}

template <typename Command>
int run_guarded(Command command) {
  try {
    return command();
  } catch (const npu_run::UsageError& e) {
    std::cerr << "npu_run: error: " << e.what() << "\n";
    return npu_run::kExitUsage;
  } catch (const std::exception& e) {
    std::cerr << "npu_run: error: " << e.what() << "\n";
    return 1;
  }
}

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
  // Whatever npu_run inherited (a scheduler's or a shell's descriptors) must not reach the
  // workers, on any kernel: the children's close_range is missing before Linux 5.9.
  npu_run::set_cloexec_from(3);
  std::vector<std::string> args(argv + 1, argv + argc);
  hide_token_arguments(argc, argv);
  if (!args.empty() && args.front() == "rdzv-server") {
    auto parsed = npu_run::parse_server_command({args.begin() + 1, args.end()});
    if (auto* early = std::get_if<npu_run::EarlyExit>(&parsed)) return report_early_exit(*early);
    return run_guarded([&] { return npu_run::serve(std::get<npu_run::ServerCommand>(parsed)); });
  }
  const npu_run::EnvMap env = npu_run::current_environment();
  if (!args.empty() && args.front() == "hostnames") {
    return npu_run::print_hostnames({args.begin() + 1, args.end()}, env);
  }
  if (!args.empty() && args.front() == "doctor") {
    auto parsed = npu_run::parse_doctor_command({args.begin() + 1, args.end()}, env);
    if (auto* early = std::get_if<npu_run::EarlyExit>(&parsed)) return report_early_exit(*early);
    return run_guarded([&] { return npu_run::doctor(std::get<npu_run::DoctorCommand>(parsed)); });
  }
  if (!args.empty() && args.front() == "rank-table") {
    auto parsed = npu_run::parse_rank_table_command({args.begin() + 1, args.end()}, env);
    if (auto* early = std::get_if<npu_run::EarlyExit>(&parsed)) return report_early_exit(*early);
    return run_guarded(
        [&] { return npu_run::make_rank_table(std::get<npu_run::RankTableCommand>(parsed)); });
  }
  npu_run::ParseResult parsed = npu_run::parse_command_line(args, env);
  if (auto* early = std::get_if<npu_run::EarlyExit>(&parsed)) return report_early_exit(*early);
  return run_guarded([&] { return npu_run::launch(std::get<npu_run::LaunchConfig>(parsed), env); });
}
