#include "cli/early_exit.hpp"

#include <fmt/format.h>

#include <CLI/CLI.hpp>

namespace npu_run {

EarlyExit usage_error(const std::string& message, const std::string& command) {
  const std::string options = command == "npu_run" ? "the options" : "its options";
  return EarlyExit{
      kExitUsage,
      fmt::format("npu_run: error: {}\nRun '{} --help' for {}.\n", message, command, options),
      true};
}

std::optional<EarlyExit> parse_options(CLI::App& app, const std::vector<std::string>& args,
                                       const std::string& command) {
  try {
    // CLI11 wants the arguments reversed when given as a vector.
    std::vector<std::string> reversed(args.rbegin(), args.rend());
    app.parse(reversed);
  } catch (const CLI::CallForHelp&) {
    return EarlyExit{0, app.help(), false};
  } catch (const CLI::ParseError& e) {
    return usage_error(e.what(), command);
  }
  return std::nullopt;
}

}  // namespace npu_run
