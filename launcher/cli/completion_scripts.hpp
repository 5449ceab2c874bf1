// Shell completion scripts for bash, zsh and tcsh (`npu_run completion SHELL`, torchrun's
// `--print-completion SHELL`), made from the commands' own CLI11 option tables, so that they
// can never miss or misspell an option: the model each generator reads, and the generators.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "cli/cli11_fwd.hpp"

namespace npu_run {

// One option as its CLI11 table defines it.
struct OptionCompletion {
  std::vector<std::string> names;  // "-t", "--tee", ...
  bool takes_value = false;
  std::string type_name;  // FILE, DIR, {a,b,...}, or what CLI11 shows (TEXT, INT, ...)
  std::string help;
};
// One command: "" for the launch command, else a subcommand and its one-line summary.
struct CommandCompletion {
  std::string name;
  std::string summary;
  std::vector<OptionCompletion> options;
};

// The shells there is a script for, as `completion` and `--print-completion` name them.
inline constexpr std::string_view kCompletionShells[] = {"bash", "zsh", "tcsh"};

CommandCompletion completion_of(std::string name, std::string summary, const CLI::App& app);

// How the value of an option completes: "file", "dir", "words:a b c", or "text" (nothing to
// offer); empty for a flag.
std::string value_kind(const OptionCompletion& option);
// Whether `text` (a name, a kind) can go into a script's case pattern or word list as it is:
// letters, digits and -_.:, and space; the rest is left out, though our tables hold none.
bool safe_in_script(const std::string& text);
// `text` in single quotes for a POSIX shell or zsh.
std::string single_quoted(const std::string& text);

// The script for `commands` (the launch command first) in `shell` (one of kCompletionShells).
std::string completion_script(std::string_view shell,
                              const std::vector<CommandCompletion>& commands);

// Each shell's, from cli/completion_bash.cpp, cli/completion_zsh.cpp, cli/completion_tcsh.cpp.
std::string bash_completion(const std::vector<CommandCompletion>& commands);
std::string zsh_completion(const std::vector<CommandCompletion>& commands);
std::string tcsh_completion(const std::vector<CommandCompletion>& commands);

}  // namespace npu_run
