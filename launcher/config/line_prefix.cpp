#include "config/line_prefix.hpp"

#include <fmt/format.h>

#include "basics/usage_error.hpp"

namespace npu_run {
namespace {

// Calls `on_text(literal)` and `on_name(placeholder)` along the template; returns false with the
// offending part in `bad` when a placeholder is unknown or unterminated.
template <typename OnText, typename OnName>
bool walk_template(const std::string& text, OnText on_text, OnName on_name, std::string& bad) {
  size_t pos = 0;
  while (pos < text.size()) {
    const auto open = text.find("${", pos);
    if (open == std::string::npos) {
      on_text(text.substr(pos));
      break;
    }
    on_text(text.substr(pos, open - pos));
    const auto close = text.find('}', open);
    if (close == std::string::npos) {
      bad = text.substr(open);
      return false;
    }
    const std::string name = text.substr(open + 2, close - open - 2);
    if (!on_name(name)) {
      bad = "${" + name + "}";
      return false;
    }
    pos = close + 1;
  }
  return true;
}

bool known(const std::string& name) {
  return name == "rank" || name == "local_rank" || name == "node_rank" || name == "role_name" ||
         name == "host" || name == "hostname";
}

}  // namespace

void validate_prefix_template(const std::string& text, const std::string& source) {
  std::string bad;
  if (!walk_template(
          text, [](const std::string&) {}, known, bad)) {
    throw UsageError(fmt::format(
        "{} '{}': '{}' is not a placeholder; use ${{rank}}, ${{local_rank}}, ${{node_rank}}, "
        "${{role_name}} or ${{host}}",
        source, text, bad));
  }
}

std::string expand_prefix_template(const std::string& text, const PrefixValues& v) {
  std::string out;
  std::string bad;
  walk_template(
      text, [&](const std::string& literal) { out += literal; },
      [&](const std::string& name) {
        if (name == "rank")
          out += std::to_string(v.rank);
        else if (name == "local_rank")
          out += std::to_string(v.local_rank);
        else if (name == "node_rank")
          out += std::to_string(v.node_rank);
        else if (name == "role_name")
          out += v.role_name;
        else if (name == "host" || name == "hostname")  // torchrun 2.x says hostname
          out += v.host;
        else
          return false;
        return true;
      },
      bad);
  return out;
}

}  // namespace npu_run
