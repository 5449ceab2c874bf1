#include "workers/python_dump.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>

#include "basics/text.hpp"

namespace npu_run {
namespace {

// Where the frames of the signalled thread start: after the header of the last dump's
// "Current thread 0x... (most recent call first):", or its "Stack (most recent call first):"
// (a dump of one thread), or, for a dump cut at its start, the last thread header there is.
std::string_view::size_type signalled_thread(std::string_view text) {
  constexpr std::string_view kHeaderEnd = "(most recent call first):\n";
  const auto fatal = text.rfind("Fatal Python error: ");
  auto header = std::string_view::npos;
  for (const std::string_view name : {"\nCurrent thread 0x", "\nStack (most recent"}) {
    const auto at = fatal != std::string_view::npos ? text.find(name, fatal) : text.rfind(name);
    if (at != std::string_view::npos) {
      header = at;
      break;
    }
  }
  if (header == std::string_view::npos) {
    header = text.rfind("\nThread 0x");
    if (header == std::string_view::npos || (fatal != std::string_view::npos && header < fatal))
      return std::string_view::npos;
  }
  const auto end = text.find(kHeaderEnd, header);
  return end == std::string_view::npos ? std::string_view::npos : end + kHeaderEnd.size();
}

// `  File "/a/b/train.py", line 88 in wait_for_data` -> "train.py:88 in wait_for_data".
std::string frame_of(std::string_view line) {
  constexpr std::string_view kFile = "  File \"";
  constexpr std::string_view kLine = "\", line ";
  if (line.substr(0, kFile.size()) != kFile) return std::string(trim(line));
  const auto quote = line.find(kLine, kFile.size());
  if (quote == std::string_view::npos) return std::string(trim(line));
  std::string_view path = line.substr(kFile.size(), quote - kFile.size());
  if (const auto slash = path.rfind('/'); slash != std::string_view::npos)
    path.remove_prefix(slash + 1);
  std::string_view rest = line.substr(quote + kLine.size());  // "88 in wait_for_data"
  const auto in = rest.find(" in ");
  if (in == std::string_view::npos) return printable(path) + ":" + printable(rest);
  return printable(path) + ":" + printable(rest.substr(0, in)) + " in " +
         printable(rest.substr(in + 4));
}

// The frames from `start` (the line after a thread's header) to the thread's end.
std::vector<std::string> frames_from(std::string_view text, std::string_view::size_type start,
                                     size_t max_frames) {
  std::vector<std::string> frames;
  if (start == std::string_view::npos) return frames;
  for (const std::string_view line : split(text.substr(start), '\n')) {
    // Frames are indented; the blank line or the "Extension modules" line after them ends the
    // thread.
    if (line.size() < 3 || line.substr(0, 2) != "  ") break;
    frames.push_back(frame_of(line));
    if (frames.size() == max_frames) break;
  }
  return frames;
}

}  // namespace

std::vector<std::string> python_dump_top_frames(std::string_view text, size_t max_frames) {
  return frames_from(text, signalled_thread(text), max_frames);
}

std::vector<std::string> python_dump_main_thread_frames(std::string_view text, size_t max_frames) {
  const std::string padded = "\n" + std::string(text);
  const std::string_view all(padded);
  auto header = all.rfind("\nThread 0x");
  if (header == std::string_view::npos) header = all.rfind("\nCurrent thread 0x");
  if (header == std::string_view::npos) return {};
  const auto end = all.find('\n', header + 1);
  return end == std::string_view::npos ? std::vector<std::string>{}
                                       : frames_from(all, end + 1, max_frames);
}

std::string file_tail(const std::string& path, size_t bytes) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) return "";
  std::string text;
  struct stat st {};
  if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
    const auto size = static_cast<size_t>(st.st_size);
    const size_t want = std::min(size, bytes);
    text.resize(want);
    const ssize_t n = ::pread(fd, text.data(), want, static_cast<off_t>(size - want));
    text.resize(n > 0 ? static_cast<size_t>(n) : 0);
  }
  ::close(fd);
  return text;
}

}  // namespace npu_run
