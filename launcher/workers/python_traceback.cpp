#include "workers/python_traceback.hpp"

#include <cctype>

#include "basics/text.hpp"

namespace npu_run {

namespace {

constexpr size_t kMaxTypeText = 128;

// `  File "/a/b/train.py", line 88, in step` -> "train.py:88 in step"; empty for other lines.
std::string traceback_frame(std::string_view line) {
  constexpr std::string_view kFile = "  File \"";
  constexpr std::string_view kLine = "\", line ";
  if (line.substr(0, kFile.size()) != kFile) return {};
  const auto quote = line.find(kLine, kFile.size());
  if (quote == std::string_view::npos) return {};
  std::string_view path = line.substr(kFile.size(), quote - kFile.size());
  if (const auto slash = path.rfind('/'); slash != std::string_view::npos)
    path.remove_prefix(slash + 1);
  std::string_view rest = line.substr(quote + kLine.size());  // "88, in step" or "1"
  const auto comma = rest.find(", in ");
  if (comma == std::string_view::npos) return printable(path) + ":" + printable(trim(rest));
  return printable(path) + ":" + printable(rest.substr(0, comma)) + " in " +
         printable(trim(rest.substr(comma + 5)));
}

// "ValueError: bad value" or "KeyboardInterrupt" at the start of a line -> its type; empty
// when the line does not start with a dotted name followed by ':' or the line's end.
std::string exception_type(std::string_view line) {
  size_t end = 0;
  while (end < line.size() && end < kMaxTypeText &&
         (std::isalnum(static_cast<unsigned char>(line[end])) != 0 || line[end] == '_' ||
          line[end] == '.'))
    ++end;
  if (end == 0 || std::isdigit(static_cast<unsigned char>(line[0])) != 0) return {};
  const std::string_view rest = trim(line.substr(end));
  if (!rest.empty() && rest.front() != ':') return {};
  const std::string_view name = line.substr(0, end);
  // A bare word on its own line is an exception only with an exception's name.
  if (rest.empty() && !name.ends_with("Error") && !name.ends_with("Exception") &&
      !name.ends_with("Interrupt") && !name.ends_with("Exit"))
    return {};
  return std::string(name);
}

}  // namespace

std::optional<PythonException> last_python_exception(std::string_view text) {
  std::optional<PythonException> last;
  std::string frame;      // the innermost frame of the traceback being read
  bool in_trace = false;  // since a frame line, or a "Traceback" header
  for (const std::string_view raw : split(text, '\n')) {
    const std::string_view line = raw.substr(0, raw.find_last_not_of('\r') + 1);
    if (line.starts_with("Traceback (most recent call last):")) {
      in_trace = true;
      frame.clear();
      continue;
    }
    if (std::string f = traceback_frame(line); !f.empty()) {
      in_trace = true;
      frame = std::move(f);
      continue;
    }
    if (!in_trace || line.empty() || line.front() == ' ') continue;  // source lines, carets
    if (std::string type = exception_type(line); !type.empty()) last = PythonException{type, frame};
    in_trace = false;
  }
  return last;
}

bool names_usage_error(std::string_view text) {
  bool usage = false;
  for (const std::string_view line : split(text, '\n')) {
    if (line.starts_with("usage: ")) usage = true;
    if (usage && line.find(": error: ") != std::string_view::npos) return true;
  }
  return false;
}

}  // namespace npu_run
