#include "remote/control_lines.hpp"

#include <fmt/format.h>

#include "basics/enum_table.hpp"
#include "basics/text.hpp"

namespace npu_run {

namespace {

constexpr std::string_view kPrefix = "\036npu_run ";

constexpr EnumTable<ControlLine::Kind, 6> kKinds({{
    {ControlLine::Kind::kHello, "hello"},
    {ControlLine::Kind::kNeedBinary, "need"},
    {ControlLine::Kind::kHaveBinary, "have"},
    {ControlLine::Kind::kReady, "ready"},
    {ControlLine::Kind::kExit, "exit"},
    {ControlLine::Kind::kFailed, "failed"},
}});

// The next space-separated word of `rest`, which is advanced past it.
std::string_view next_word(std::string_view& rest) {
  const size_t space = rest.find(' ');
  const std::string_view word = rest.substr(0, space);
  rest = space == std::string_view::npos ? std::string_view{} : rest.substr(space + 1);
  return word;
}

}  // namespace

std::string format_control(const ControlLine& line) {
  const std::string_view kind = kKinds.name(line.kind);
  switch (line.kind) {
    case ControlLine::Kind::kExit:
      return fmt::format("{}{} {} {}\n", kPrefix, kind, line.host, line.code);
    case ControlLine::Kind::kFailed: {
      std::string text = printable(line.text);  // one line, whatever ssh said
      return fmt::format("{}{} {} {} {}\n", kPrefix, kind, line.host, line.code, text);
    }
    default:
      return fmt::format("{}{} {}\n", kPrefix, kind, line.host);
  }
}

std::optional<ControlLine> parse_control(std::string_view line) {
  if (line.substr(0, kPrefix.size()) != kPrefix) return std::nullopt;
  std::string_view rest = line.substr(kPrefix.size());
  const auto kind = kKinds.find(next_word(rest));
  if (!kind) return std::nullopt;
  ControlLine parsed;
  parsed.kind = *kind;
  parsed.host = std::string(next_word(rest));
  if (parsed.host.empty()) return std::nullopt;
  if (parsed.kind == ControlLine::Kind::kExit || parsed.kind == ControlLine::Kind::kFailed) {
    const auto code = parse_integer(next_word(rest), 0, 255);
    if (!code) return std::nullopt;
    parsed.code = static_cast<int>(*code);
    parsed.text = std::string(rest);
  }
  return parsed;
}

std::string format_stop(int sig) {
  return fmt::format("stop {}\n", sig);
}

std::optional<int> parse_stop(std::string_view line) {
  constexpr std::string_view kStop = "stop ";
  if (line.substr(0, kStop.size()) != kStop) return std::nullopt;
  const auto sig = parse_integer(line.substr(kStop.size()), 1, 64);
  if (!sig) return std::nullopt;
  return static_cast<int>(*sig);
}

}  // namespace npu_run
