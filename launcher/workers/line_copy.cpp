#include "workers/line_copy.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>

#include "basics/descriptors.hpp"

namespace npu_run {

DuplicateLines::DuplicateLines(const std::string& path, std::vector<std::string> filters,
                               std::string prefix)
    : fd_(::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644)),
      filters_(std::move(filters)),
      prefix_(std::move(prefix)) {}

DuplicateLines::~DuplicateLines() {
  finish();
  if (fd_ >= 0) ::close(fd_);
}

void DuplicateLines::feed(std::string_view data) {
  if (fd_ < 0) return;
  while (!data.empty()) {
    if (after_return_ && data.front() == '\n') data.remove_prefix(1);
    after_return_ = false;
    const auto end = data.find_first_of("\r\n");
    const std::string_view part = data.substr(0, end);
    line_.append(part.substr(0, kMaxLine - std::min(kMaxLine, line_.size())));
    if (end == std::string_view::npos) return;
    // A '\r' ends a line as for a terminal: each redraw of a progress bar is judged alone.
    after_return_ = data[end] == '\r';
    end_line();
    data.remove_prefix(end + 1);
  }
}

void DuplicateLines::finish() {
  if (!line_.empty()) end_line();
}

void DuplicateLines::end_line() {
  const bool wanted = std::any_of(filters_.begin(), filters_.end(), [&](const std::string& f) {
    return line_.find(f) != std::string::npos;
  });
  if (wanted) {
    std::string out;
    out.reserve(prefix_.size() + line_.size() + 1);
    out.append(prefix_).append(line_).push_back('\n');
    if (!write_fully(fd_, out)) {
      ::close(fd_);  // disk full or similar: the rank's own log and the console go on
      fd_ = -1;
    }
  }
  line_.clear();
}

}  // namespace npu_run
