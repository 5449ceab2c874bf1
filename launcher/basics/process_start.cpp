#include "basics/process_start.hpp"

#include <unistd.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <string>

namespace npu_run {

namespace {

int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// The boot time in seconds since the epoch ("btime" of /proc/stat); 0 if unknown.
int64_t boot_time_s() {
  std::ifstream stat("/proc/stat");
  std::string key;
  while (stat >> key) {
    if (key == "btime") {
      int64_t value = 0;
      stat >> value;
      return value;
    }
    stat.ignore(1 << 20, '\n');
  }
  return 0;
}

// Clock ticks from boot to this process' start (field 22 of /proc/self/stat); -1 if unknown.
int64_t start_ticks() {
  std::ifstream stat("/proc/self/stat");
  std::string line;
  if (!std::getline(stat, line)) return -1;
  // The command name (field 2) may hold spaces and parentheses: count from its last ')'.
  const size_t close = line.rfind(')');
  if (close == std::string::npos) return -1;
  std::istringstream rest(line.substr(close + 2));
  std::string field;
  for (int i = 3; i < 22 && rest >> field; ++i) {
  }
  int64_t ticks = -1;
  rest >> ticks;
  return rest ? ticks : -1;
}

int64_t read_start_ms() {
  const int64_t boot = boot_time_s();
  const int64_t ticks = start_ticks();
  const long hz = ::sysconf(_SC_CLK_TCK);
  if (boot <= 0 || ticks < 0 || hz <= 0) return now_ms();
  const int64_t start = boot * 1000 + ticks * 1000 / hz;
  // btime is whole seconds and may be adjusted since: never later than now.
  return std::min(start, now_ms());
}

}  // namespace

int64_t process_start_ms() {
  static const int64_t start = read_start_ms();
  return start;
}

}  // namespace npu_run
