#include "cli/early_exit.hpp"

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <regex>

namespace npu_run {

EarlyExit usage_error(const std::string& message, const std::string& command) {
  const std::string options = command == "npu_run" ? "the options" : "its options";
  return EarlyExit{
      kExitUsage,
      fmt::format("npu_run: error: {}\nRun '{} --help' for {}.\n", message, command, options),
      true};
}

namespace {

// What a value of `option` looks like, for messages: CLI11's type names are its own.
std::string value_shape(const CLI::Option* option) {
  const std::string type = option == nullptr ? "TEXT" : option->get_type_name();
  if (type == "INT" || type == "UINT") return "a whole number";
  if (type == "FLOAT") return "a number";
  if (type.empty() || type == "TEXT") return "a value";
  if (type.front() == '{') return "one of " + type;  // a choice list such as {static,c10d}
  return type;                                       // DIR, FILE...
}

}  // namespace

std::string explain_parse_error(const CLI::ParseError& error, const CLI::App& app) {
  const std::string what = error.what();
  // CLI11: "Could not convert: --max-restarts = abc" and "--nnodes: 1 required TEXT missing".
  static const std::regex kConversion(R"(^Could not convert: (\S+) = (.*)$)");
  static const std::regex kMissing(R"(^(\S+): \d+ required \S* ?missing$)");
  std::smatch m;
  if (std::regex_match(what, m, kConversion)) {
    const CLI::Option* option = app.get_option_no_throw(m[1].str());
    return fmt::format("{} '{}': expected {}", m[1].str(), m[2].str(), value_shape(option));
  }
  if (std::regex_match(what, m, kMissing)) {
    const CLI::Option* option = app.get_option_no_throw(m[1].str());
    return fmt::format("{} needs {}; write it after the option, e.g. '{} VALUE' or '{}=VALUE'",
                       m[1].str(), value_shape(option), m[1].str(), m[1].str());
  }
  return what;
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
    return usage_error(explain_parse_error(e, app), command);
  }
  return std::nullopt;
}

}  // namespace npu_run
