// The device and link faults a worker's output or error file can name: one table, each row a
// text to look for and what it means. A worker that died naming one of them failed because of
// its node, not its script: the restart classification counts it as infrastructure
// (rendezvous/state/failure_class.hpp), which takes a spare instead of a restart.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace npu_run {

struct FaultPattern {
  std::string_view text;     // looked for as it is, or ignoring case (`any_case`)
  std::string_view meaning;  // "HCCL could not set up a link in time"
  bool any_case = false;
};

// The table (fault_patterns.cpp says where each row comes from).
std::span<const FaultPattern> fault_patterns();

struct FaultMatch {
  std::string meaning;
  std::string line;  // the line that named it, trimmed and cut to kMaxFaultLine bytes
};

inline constexpr size_t kMaxFaultLine = 240;

// The first line of `text` (worker output, an error file's message or traceback) that names a
// device or link fault; none when no line does.
std::optional<FaultMatch> find_fault(std::string_view text);

}  // namespace npu_run
