#include "health/tool_run.hpp"

#include <fmt/format.h>

#include <cstring>

#include "basics/exit_status.hpp"
#include "basics/text.hpp"

namespace npu_run {

namespace {

// The last non-blank line of a tool's message: hccn_tool and npu-smi put the reason last.
std::string last_line(std::string_view text) {
  text = trim(text);
  const size_t newline = text.rfind('\n');
  if (newline != std::string_view::npos) text = trim(text.substr(newline + 1));
  return printable(text);
}

}  // namespace

std::string ToolRun::describe() const {
  switch (end) {
    case End::kTimedOut:
      return fmt::format("no answer within {:.1f} s (stopped)",
                         static_cast<double>(elapsed_ms) / 1000.0);
    case End::kNotStarted:
      return fmt::format("could not be started: {}", std::strerror(code));
    case End::kSignaled:
      return fmt::format("killed by {}", signal_name(code));
    case End::kExited:
      break;
  }
  std::string said = last_line(err);
  if (said.empty()) said = last_line(out);
  if (said.empty()) return fmt::format("exit {}", code);
  return fmt::format("exit {}: {}", code, said);
}

std::string ToolRun::command_line() const {
  std::string line;
  for (size_t i = 0; i < argv.size(); ++i) {
    std::string word = argv[i];
    if (i == 0 && word.rfind('/') != std::string::npos) word = word.substr(word.rfind('/') + 1);
    if (!line.empty()) line += ' ';
    line += word;
  }
  return line;
}

}  // namespace npu_run
