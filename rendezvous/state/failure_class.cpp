#include "rendezvous/state/failure_class.hpp"

#include <fmt/format.h>

#include <array>
#include <string_view>

#include "basics/enum_table.hpp"
#include "basics/exit_status.hpp"

namespace npu_run::rdzv {

namespace {

// Exceptions that, early in a run, mean the script or its environment is broken as written.
constexpr std::array<std::string_view, 5> kBrokenAtStart = {
    "ImportError", "ModuleNotFoundError", "SyntaxError", "IndentationError", "TabError"};

bool broken_at_start(const std::string& type) {
  // "foo.ModuleNotFoundError" is not Python's; the short name is what Python prints.
  for (std::string_view name : kBrokenAtStart) {
    if (type == name) return true;
  }
  return false;
}

std::string where(const FailureReport& f) {
  std::string text = fmt::format("node {} ({})", f.node_rank, f.host);
  if (f.rank >= 0) text = fmt::format("rank {} on ", f.rank) + text;
  return text;
}

std::string raised(const FailureEvidence& e) {
  return e.frame.empty() ? e.exception : fmt::format("{} at {}", e.exception, e.frame);
}

// The module in Python's "No module named x" (`python -m x`, which prints no traceback) or
// "No module named 'x'" (an import's ModuleNotFoundError); empty when the line says neither.
std::string missing_module(const std::string& line) {
  constexpr std::string_view kSays = "No module named ";
  const size_t at = line.find(kSays);
  if (at == std::string::npos) return "";
  std::string name = line.substr(at + kSays.size());
  if (name.size() >= 2 && name.front() == '\'' && name.back() == '\'')
    name = name.substr(1, name.size() - 2);
  return name;
}

// What a rank printed last and how it ended, when it raised no Python exception.
bool same_end_without_exception(const FailureReport& failure, const FailureReport& previous) {
  const FailureEvidence& e = failure.evidence;
  return e.exception.empty() && previous.evidence.exception.empty() && !e.last_line.empty() &&
         e.last_line == previous.evidence.last_line && failure.exit_code == previous.exit_code &&
         e.last_beat == previous.evidence.last_beat;
}

Classification infrastructure(const std::string& why) {
  return {FailureClass::kInfrastructure, "infrastructure: " + why};
}

Classification deterministic(const std::string& why) {
  return {FailureClass::kDeterministic, "deterministic: " + why};
}

}  // namespace

Classification classify_failure(const FailureReport& failure, const FailureReport* previous) {
  const FailureEvidence& e = failure.evidence;
  if (failure.lost)
    return infrastructure(fmt::format("node {} ({}) was lost", failure.node_rank, failure.host));
  if (e.oom) return infrastructure(where(failure) + " was killed by the kernel's OOM killer");
  if (!e.fault.empty())
    return infrastructure(fmt::format("{} named a fault: {}", where(failure), e.fault));
  if (failure.exit_code == kExitHealth)
    return infrastructure(
        fmt::format("node {} ({}) failed its health gate", failure.node_rank, failure.host));
  if (e.early && e.usage) return deterministic("a usage error at start");
  if (e.early && broken_at_start(e.exception)) return deterministic(raised(e) + " at start");
  if (const std::string module = missing_module(e.last_line); e.early && !module.empty()) {
    return deterministic(fmt::format(
        "Python found no module '{}' at start; it looks in the script's directory (for -m, the "
        "working directory) and PYTHONPATH: check the name, both, and that the package is "
        "installed for this Python",
        module));
  }
  if (previous != nullptr && same_end_without_exception(failure, *previous)) {
    return deterministic(fmt::format("'{}', then {}, twice", e.last_line, failure.description));
  }
  if (previous != nullptr && !e.exception.empty() && e.exception == previous->evidence.exception &&
      e.frame == previous->evidence.frame && e.last_beat == previous->evidence.last_beat) {
    const std::string beat =
        e.last_beat.empty() ? "" : fmt::format(" after beat '{}'", e.last_beat);
    return deterministic(fmt::format("{}{}, twice", raised(e), beat));
  }
  return {FailureClass::kOther,
          "other: not a node's fault, and not the same failure as the attempt before"};
}

const char* failure_class_name(FailureClass kind) {
  static constexpr EnumTable<FailureClass, 4> kNames(
      {{{FailureClass::kNone, "none"},
        {FailureClass::kInfrastructure, "infrastructure"},
        {FailureClass::kDeterministic, "deterministic"},
        {FailureClass::kOther, "other"}}});
  return kNames.name(kind).data();  // the table holds literals
}

}  // namespace npu_run::rdzv
