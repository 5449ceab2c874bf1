// libFuzzer target: the command lines of npu_run and of its subcommands. The input is split at
// NUL bytes into arguments; every outcome must be a parsed command or an EarlyExit (usage error,
// help), never a crash or an escaping exception.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "cli/parse_launch.hpp"
#include "commands/commands.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // The arguments after "npu_run" (or after the subcommand's name).
  std::vector<std::string> args(1);
  for (size_t i = 0; i < size; ++i) {
    if (data[i] == 0)
      args.emplace_back();
    else
      args.back().push_back(static_cast<char>(data[i]));
  }
  // A fixed environment (no scheduler, no PET_ variables): parsing reads nothing else.
  const npu_run::EnvMap env = {{"PATH", "/usr/bin:/bin"}};
  (void)npu_run::parse_command_line(args, env);
  (void)npu_run::parse_server_command(args, env);
  (void)npu_run::parse_rank_table_command(args, env);
  (void)npu_run::parse_doctor_command(args, env);
  return 0;
}
