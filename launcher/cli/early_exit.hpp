// How parsing ends without a command to run: --help, --version, or a usage error, each a text
// for stdout or stderr and an exit status. Every command's parser returns one of these instead of
// throwing, so main() prints it in one place.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "basics/usage_error.hpp"
#include "cli/cli11_fwd.hpp"

namespace npu_run {

struct EarlyExit {
  int exit_code = 0;
  std::string text;
  bool to_stderr = false;
  bool version = false;      // --version: the caller prints the build and kernel facts instead
  bool help = false;         // npu_run --help: the caller adds the list of subcommands
  std::string completion{};  // --print-completion SHELL: the caller prints the script instead
};

// "npu_run: error: MESSAGE" and where to find the options of `command` ("npu_run",
// "npu_run rdzv-server"), exit status 2.
EarlyExit usage_error(const std::string& message, const std::string& command = "npu_run");

// Parses `args` (argv[0] and the subcommand's name left out) with `app`: nothing when parsing
// went through, else --help or CLI11's own complaint as an EarlyExit for `command`.
// CLI11's message for a parse error, in npu_run's words when CLI11's own would puzzle a user
// ("Could not convert: --x = y", "1 required TEXT missing"); other messages unchanged.
std::string explain_parse_error(const CLI::ParseError& error, const CLI::App& app);

std::optional<EarlyExit> parse_options(CLI::App& app, const std::vector<std::string>& args,
                                       const std::string& command);

// What `resolve()` returns, or its UsageError as the usage EarlyExit of `command`.
template <typename Resolve>
auto resolve_or_exit(Resolve resolve, const std::string& command)
    -> std::variant<decltype(resolve()), EarlyExit> {
  try {
    return resolve();
  } catch (const UsageError& e) {
    return usage_error(e.what(), command);
  }
}

// A subcommand's command line: its option table (`Options`) filled from `args`, then
// `resolve(options)`; --help, CLI11's complaints and a UsageError become `command`'s EarlyExit.
template <typename Options, typename Resolve>
auto parse_subcommand(const std::vector<std::string>& args, const std::string& command,
                      Resolve resolve)
    -> std::variant<decltype(resolve(std::declval<Options&>())), EarlyExit> {
  Options options;
  if (auto early = parse_options(options.app(), args, command)) return *early;
  return resolve_or_exit([&] { return resolve(options); }, command);
}

}  // namespace npu_run
