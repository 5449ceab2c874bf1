// `npu_run completion bash|zsh|tcsh` (and torchrun 2.14's `npu_run --print-completion SHELL`):
// the completion script of every command, generated from their own option tables
// (cli/completion_scripts.hpp). Packages install the bash and zsh scripts.
#include <fmt/format.h>

#include <algorithm>
#include <iostream>

#include "basics/exit_status.hpp"
#include "cli/completion_scripts.hpp"
#include "commands/commands.hpp"

namespace npu_run {

std::string completion_script_for(std::string_view shell) {
  std::vector<CommandCompletion> commands = {completion_of("", "", launch_options()->app())};
  for (const Subcommand& sub : subcommands()) {
    if (sub.options) {
      commands.push_back(completion_of(sub.name, sub.summary, sub.options()->app()));
    } else {
      commands.push_back(CommandCompletion{sub.name, sub.summary, {}});
    }
  }
  return completion_script(shell, commands);
}

int print_completion(const std::vector<std::string>& args, const EnvMap& /*env*/) {
  const bool known =
      args.size() == 1 && std::find(std::begin(kCompletionShells), std::end(kCompletionShells),
                                    args.front()) != std::end(kCompletionShells);
  if (!known) {
    std::cerr << fmt::format(
        "npu_run: error: usage: npu_run completion {{{}}} (source the output, or save it where "
        "the shell reads completions: /etc/bash_completion.d/npu_run, a folder of zsh's $fpath "
        "as _npu_run)\n",
        fmt::join(kCompletionShells, ","));
    return kExitUsage;
  }
  std::cout << completion_script_for(args.front());
  return 0;
}

}  // namespace npu_run
