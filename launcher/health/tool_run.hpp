// One call of a health tool, as it ended: what the node checks judge. The agent fills it in
// (agent/tool_calls.hpp); the checks never start a process.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace npu_run {

struct ToolRun {
  enum class End { kExited, kSignaled, kTimedOut, kNotStarted };
  std::vector<std::string> argv;  // as run: the tool's path first
  End end = End::kExited;
  int code = 0;     // kExited: the exit code; kSignaled: the signal; kNotStarted: errno
  std::string out;  // stdout, at most kToolOutputCap bytes
  std::string err;  // stderr, the same
  int64_t elapsed_ms = 0;
  int attempts = 1;  // more than one: it answered "busy" and was run again

  bool exited_zero() const { return end == End::kExited && code == 0; }
  // hccn_tool's "busy" (exit 11, on stdout): another call held the tool; worth another try.
  bool busy() const {
    return end == End::kExited && code == 11 && out.find("busy") != std::string::npos;
  }
  // "timed out after 10 s", "exit 13: Get ipconf failed, ...", "signal SIGKILL (9)".
  std::string describe() const;
  // "hccn_tool -i 5 -link -g": the command as a person types it (the tool's base name).
  std::string command_line() const;
};

// A tool that prints more is cut there: the checks read the first lines, and a peer of npu_run
// (a tool gone wrong) never grows its memory without bound.
inline constexpr size_t kToolOutputCap = size_t{256} * 1024;

}  // namespace npu_run
