// The table of subcommands: main() dispatches from it, and `npu_run completion bash` lists it.
#include <iostream>

#include "basics/usage_error.hpp"
#include "commands/commands.hpp"

namespace npu_run {

int report_early_exit(const EarlyExit& early) {
  (early.to_stderr ? std::cerr : std::cout) << (early.version ? version_report() : early.text);
  return early.exit_code;
}

int run_guarded(const std::function<int()>& command) {
  try {
    return command();
  } catch (const UsageError& e) {
    std::cerr << "npu_run: error: " << e.what() << "\n";
    return kExitUsage;
  } catch (const std::exception& e) {
    std::cerr << "npu_run: error: " << e.what() << "\n";
    return 1;
  }
}

namespace {

// Parses with `parse`, then runs `run` on the parsed command (or prints the early exit).
template <typename Parse, typename Run>
int parse_and_run(Parse parse, Run run) {
  auto parsed = parse();
  if (auto* early = std::get_if<EarlyExit>(&parsed)) return report_early_exit(*early);
  return run_guarded([&] { return run(std::get<0>(parsed)); });
}

}  // namespace

const std::vector<Subcommand>& subcommands() {
  static const std::vector<Subcommand> table = {
      {"rdzv-server",
       [](const std::vector<std::string>& args, const EnvMap&) {
         return parse_and_run([&] { return parse_server_command(args); }, serve);
       }},
      {"rank-table",
       [](const std::vector<std::string>& args, const EnvMap& env) {
         return parse_and_run([&] { return parse_rank_table_command(args, env); }, make_rank_table);
       }},
      {"doctor",
       [](const std::vector<std::string>& args, const EnvMap& env) {
         return parse_and_run([&] { return parse_doctor_command(args, env); }, doctor);
       }},
      {"hostnames", print_hostnames},
      {"completion", print_completion},
  };
  return table;
}

}  // namespace npu_run
