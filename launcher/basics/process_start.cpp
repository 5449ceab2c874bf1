#include "basics/process_start.hpp"

#include <time.h>
#include <unistd.h>

#include <algorithm>
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

// Ms since boot now, on the clock /proc/self/stat's start time counts on (boot time, suspend
// included); -1 if unknown.
int64_t since_boot_ms() {
  struct timespec now {};
  if (::clock_gettime(CLOCK_BOOTTIME, &now) != 0) return -1;
  return static_cast<int64_t>(now.tv_sec) * 1000 + now.tv_nsec / 1'000'000;
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

// Now, less the time since the start: /proc/stat's btime would do it in one read, but it is whole
// seconds (a single node's round then "formed in 0.9 s" after 5 ms).
int64_t read_start_ms() {
  const int64_t boot_now = since_boot_ms();
  const int64_t ticks = start_ticks();
  const long hz = ::sysconf(_SC_CLK_TCK);
  const int64_t now = now_ms();
  if (boot_now < 0 || ticks < 0 || hz <= 0) return now;
  const int64_t age = boot_now - ticks * 1000 / hz;
  return now - std::max<int64_t>(age, 0);
}

}  // namespace

int64_t process_start_ms() {
  static const int64_t start = read_start_ms();
  return start;
}

}  // namespace npu_run
