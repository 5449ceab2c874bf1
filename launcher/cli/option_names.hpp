// Options as users meet them: both spellings (--nproc-per-node, --nproc_per_node), a PET_<NAME>
// variable each (as torchrun reads them), and messages that name what is on the user's screen:
// the spelling typed, or the variable the value came from.
//
// The PET_ values come from the environment map handed to the parser, not from the process:
// parsing is a function of its arguments. CLI11's own environment lookup is not used.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "basics/environment.hpp"
#include "cli/cli11_fwd.hpp"

namespace npu_run {

class OptionNames {
 public:
  // "--nproc-per-node" -> "--nproc-per-node,--nproc_per_node" (CLI11 name list).
  static std::string spellings(const std::string& dashed);
  // "--nproc-per-node" -> "PET_NPROC_PER_NODE".
  static std::string env_name(const std::string& dashed);

  // Remembers that `option` also comes from `variable`.
  void bind(CLI::Option* option, std::string variable);
  // After parsing: every bound option the command line did not give takes its variable's value
  // from `env`. Throws CLI::ParseError when that value does not convert.
  void apply_environment(const EnvMap& env);
  // The arguments up to the script, so that source() can tell which spelling was typed.
  void set_typed(std::vector<std::string> options_part) { typed_ = std::move(options_part); }

  // The spelling the user typed ("-t", "--nproc_per_node"), else the variable the value came
  // from, else the option's first long name.
  std::string source(const CLI::Option* option) const;
  // Given on the command line or through its variable.
  static bool given(const CLI::Option* option);
  // Given through its variable only (PET_MASTER_PORT from Kubeflow, not a flag the user typed).
  bool from_environment(const CLI::Option* option) const { return from_env_.count(option) > 0; }
  // " (note: PET_X=v is set in the environment)" when `message` names an option whose variable
  // is set: a stale exported variable is a common and puzzling cause.
  std::string env_hint(const std::string& message, const EnvMap& env) const;
  // Every long spelling of `app`, for "did you mean".
  static std::vector<std::string> long_names(const CLI::App& app);
  // --help shows each option's variable ("(Env:PET_NNODES)"). Set only for printing the help:
  // set before parsing, CLI11 would read the process environment itself.
  void show_variables_in_help();

 private:
  std::map<CLI::Option*, std::string> variables_;
  std::map<const CLI::Option*, std::string> from_env_;  // applied from the environment
  std::vector<std::string> typed_;
};

// The options part of `args` (up to the script or "--") as argparse reads it: abbreviated long
// options written out ("--max_restart 3" -> "--max_restarts 3", "--rdzv_endp=h:1" ->
// "--rdzv_endpoint=h:1"), and "--name=" of an option with a value given the empty value as a
// word of its own ("--role=" -> "--role" ""). Throws UsageError when an abbreviation fits
// several options, naming them. Unknown options are left for the parser to report.
std::vector<std::string> spell_out_options(const std::vector<std::string>& args,
                                              const CLI::App& app);

// "unknown option '--nproc-per-nod'; did you mean '--nproc-per-node'?" (within 3 edits), or where
// to look.
std::string unknown_option_message(const std::string& token, const std::vector<std::string>& names);

}  // namespace npu_run
