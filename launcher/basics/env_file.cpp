#include "basics/env_file.hpp"

#include <fmt/format.h>

#include <cctype>

#include "basics/text.hpp"
#include "basics/usage_error.hpp"

namespace npu_run {

bool is_variable_name(std::string_view name) {
  if (name.empty() || std::isdigit(static_cast<unsigned char>(name.front())) != 0) return false;
  for (char c : name) {
    if (std::isalnum(static_cast<unsigned char>(c)) == 0 && c != '_') return false;
  }
  return true;
}

std::vector<std::pair<std::string, std::string>> parse_env_file(std::string_view content,
                                                                const std::string& path) {
  std::vector<std::pair<std::string, std::string>> variables;
  int line_number = 0;
  for (std::string_view line : split(content, '\n')) {
    ++line_number;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    const std::string_view text = trim(line);
    if (text.empty() || text.front() == '#') continue;
    const size_t equals = line.find('=');
    const std::string_view name = trim(line.substr(0, equals));
    if (equals == std::string_view::npos || !is_variable_name(name)) {
      throw UsageError(fmt::format(
          "{} line {}: '{}' is not NAME=VALUE (a variable name, '=', its value; '#' starts a "
          "comment line)",
          path, line_number, printable(text)));
    }
    variables.emplace_back(std::string(name), std::string(line.substr(equals + 1)));
  }
  return variables;
}

}  // namespace npu_run
