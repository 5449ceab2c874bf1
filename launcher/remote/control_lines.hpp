// The lines npu_run's own processes exchange over an ssh session, told apart from a host's
// output by their first byte, ASCII's record separator (0x1e), which no training log starts a
// line with. Host -> launcher: hello (the host-agent runs and waits for its preamble), need or
// have (--ship-binary: whether the host wants the binary), ready (the agent has its options and
// starts), exit (the agent ended with this code), failed (a relay could not start a host of its
// subtree). Launcher -> host, on stdin after the preamble: "stop SIGNAL" lines; EOF means the
// launcher is gone.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace npu_run {

inline constexpr char kControlMark = '\036';

struct ControlLine {
  enum class Kind { kHello, kNeedBinary, kHaveBinary, kReady, kExit, kFailed };
  Kind kind = Kind::kHello;
  std::string host;  // ready, exit, failed: the host it is about; hello: npu_run's version
  int code = 0;      // exit, failed
  std::string text;  // failed: what ssh or the host said (one line)
};

// The line, with its mark and '\n'.
std::string format_control(const ControlLine& line);
// A line without its '\n'; nullopt when it is not a well-formed control line.
std::optional<ControlLine> parse_control(std::string_view line);

// "stop 15\n": stop the job as signal 15 would.
std::string format_stop(int sig);
// The signal of a stop line (without '\n'); nullopt for anything else.
std::optional<int> parse_stop(std::string_view line);

}  // namespace npu_run
