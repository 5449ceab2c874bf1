#include "workers/stack_dump.hpp"

#include <sys/resource.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

namespace npu_run {

namespace {

// The process group in /proc/<pid>/stat: the fifth field, after the command in parentheses
// (which may itself contain spaces and parentheses, hence the last ')').
pid_t process_group_of(const std::string& pid) {
  std::ifstream in("/proc/" + pid + "/stat");
  std::string stat;
  if (!std::getline(in, stat)) return -1;
  const auto close = stat.rfind(')');
  if (close == std::string::npos) return -1;
  char state = 0;
  long parent = 0;
  long group = 0;
  if (std::sscanf(stat.c_str() + close + 1, " %c %ld %ld", &state, &parent, &group) != 3) return -1;
  return static_cast<pid_t>(group);
}

}  // namespace

int disable_core_dumps(const std::vector<pid_t>& process_groups) {
  int lowered = 0;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator("/proc", ec)) {
    const std::string name = entry.path().filename().string();
    if (name.empty() || !std::all_of(name.begin(), name.end(), ::isdigit)) continue;
    const pid_t group = process_group_of(name);
    if (std::find(process_groups.begin(), process_groups.end(), group) == process_groups.end())
      continue;
    const auto pid = static_cast<pid_t>(std::strtol(name.c_str(), nullptr, 10));
    rlimit limit{};
    if (::prlimit(pid, RLIMIT_CORE, nullptr, &limit) != 0) continue;
    limit.rlim_cur = 0;
    if (::prlimit(pid, RLIMIT_CORE, &limit, nullptr) == 0) ++lowered;
  }
  return lowered;
}

}  // namespace npu_run
