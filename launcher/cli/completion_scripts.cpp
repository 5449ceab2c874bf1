#include "cli/completion_scripts.hpp"

#include <CLI/CLI.hpp>
#include <cctype>

namespace npu_run {

CommandCompletion completion_of(std::string name, std::string summary, const CLI::App& app) {
  CommandCompletion command{std::move(name), std::move(summary), {}};
  for (const CLI::Option* opt : app.get_options()) {
    OptionCompletion option;
    for (const auto& s : opt->get_snames()) option.names.push_back("-" + s);
    for (const auto& l : opt->get_lnames()) option.names.push_back("--" + l);
    option.takes_value = opt->get_expected_max() > 0;  // 0 for a flag
    option.type_name = opt->get_type_name();
    option.help = opt->get_description();
    command.options.push_back(std::move(option));
  }
  return command;
}

std::string value_kind(const OptionCompletion& option) {
  if (!option.takes_value) return "";
  const std::string& type = option.type_name;
  if (type == "FILE") return "file";
  if (type == "DIR") return "dir";
  if (type.size() > 2 && type.front() == '{' && type.back() == '}') {
    std::string words = type.substr(1, type.size() - 2);
    for (char& c : words) c = c == ',' ? ' ' : c;
    return "words:" + words;
  }
  return "text";
}

bool safe_in_script(const std::string& text) {
  for (char c : text) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) ||
          std::string_view("-_.:, ").find(c) != std::string_view::npos))
      return false;
  }
  return true;
}

std::string single_quoted(const std::string& text) {
  std::string quoted = "'";
  for (char c : text) {
    if (c == '\'') {
      quoted += "'\\''";
    } else {
      quoted += c;
    }
  }
  return quoted + "'";
}

std::string completion_script(std::string_view shell,
                              const std::vector<CommandCompletion>& commands) {
  if (shell == "zsh") return zsh_completion(commands);
  if (shell == "tcsh") return tcsh_completion(commands);
  return bash_completion(commands);
}

}  // namespace npu_run
