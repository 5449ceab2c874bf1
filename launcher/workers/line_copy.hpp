// DuplicateLines: torchrun 2.x's --duplicate-stdout-filters/--duplicate-stderr-filters. Lines of
// a worker stream that contain any of the filter strings are copied, with the rank's prefix, to
// one file shared by the attempt's workers (attempt_<n>/filtered_stdout.log). Each relay owns
// one and feeds it the bytes as they arrive; a whole line goes out in one O_APPEND write, so
// the ranks' lines interleave but never mix.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace npu_run {

class DuplicateLines {
 public:
  // A line is judged on its first kMaxLine bytes and copied cut there: the rank's own log and
  // the console have it whole, and a peer that never ends a line cannot grow the agent.
  static constexpr size_t kMaxLine = size_t{64} * 1024;

  // Opens `path` for appending, created if missing; is_open() is false if that failed.
  DuplicateLines(const std::string& path, std::vector<std::string> filters, std::string prefix);
  ~DuplicateLines();
  DuplicateLines(const DuplicateLines&) = delete;
  DuplicateLines& operator=(const DuplicateLines&) = delete;

  bool is_open() const { return fd_ >= 0; }
  void feed(std::string_view data);
  // The worker is gone: a last line without '\n' is judged too.
  void finish();

 private:
  void end_line();

  int fd_ = -1;
  std::vector<std::string> filters_;
  std::string prefix_;
  std::string line_;
  bool after_return_ = false;  // the '\n' of a "\r\n" ends no second line
};

}  // namespace npu_run
