#include "agent/core/oom_kills.hpp"

#include <fstream>
#include <sstream>

#include "basics/text.hpp"

namespace npu_run {

namespace {

std::optional<uint64_t> counter_in(const std::string& path) {
  std::ifstream in(path);
  std::string key;
  uint64_t value = 0;
  while (in >> key >> value) {
    if (key == "oom_kill") return value;
  }
  return std::nullopt;
}

std::string file_text(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

std::optional<uint64_t> oom_kill_count(const std::string& proc_cgroup,
                                       const std::string& cgroup_root) {
  // "N:memory:/path" (or "N:cpu,memory:/path") is cgroup v1's memory controller, which wins on
  // a hybrid host; "0::/path" is cgroup v2's one hierarchy. In a container the mount shows the
  // container's own cgroup at its root, not at the path the kernel names: that is tried next.
  std::optional<std::string> v1;
  std::optional<std::string> v2;
  for (const std::string_view line : split(proc_cgroup, '\n')) {
    const auto first = line.find(':');
    const auto second = line.find(':', first + 1);
    if (first == std::string_view::npos || second == std::string_view::npos) continue;
    const std::string_view controllers = line.substr(first + 1, second - first - 1);
    const std::string path(line.substr(second + 1));
    if (controllers.empty() && line.substr(0, first) == "0") v2 = path;
    for (const std::string_view c : split(controllers, ',')) {
      if (c == "memory") v1 = path;
    }
  }
  const auto first_of = [](const std::string& at_path, const std::string& at_root) {
    auto count = counter_in(at_path);
    return count ? count : counter_in(at_root);
  };
  if (v1) {
    return first_of(cgroup_root + "/memory" + *v1 + "/memory.oom_control",
                    cgroup_root + "/memory/memory.oom_control");
  }
  if (v2) return first_of(cgroup_root + *v2 + "/memory.events", cgroup_root + "/memory.events");
  return std::nullopt;
}

std::optional<uint64_t> own_oom_kill_count() {
  return oom_kill_count(file_text("/proc/self/cgroup"), "/sys/fs/cgroup");
}

}  // namespace npu_run
