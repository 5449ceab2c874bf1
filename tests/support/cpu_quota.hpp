// A cgroup v1 CPU quota (cpu.cfs_quota_us) that slows a node on this machine as a throttled or
// shared host would: the test joins it while it starts a node (enter/leave), or moves a running
// process tree into it (take), or only the tree's descendants (take_children). Removed, its
// members back in the root group, when it goes.
#pragma once

#include <fmt/format.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

namespace npu_run::testing {

// Every process under `root` (its descendants by their parents in /proc), root first.
inline std::vector<pid_t> process_tree(pid_t root) {
  std::multimap<pid_t, pid_t> children;
  for (const auto& e : std::filesystem::directory_iterator("/proc")) {
    const std::string name = e.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream stat(e.path() / "stat");
    std::string line;
    std::getline(stat, line);
    const auto close = line.rfind(')');
    if (close == std::string::npos) continue;
    std::istringstream rest(line.substr(close + 2));
    char state = 0;
    pid_t parent = 0;
    rest >> state >> parent;
    children.emplace(parent, std::stoi(name));
  }
  std::vector<pid_t> tree{root};
  for (size_t i = 0; i < tree.size(); ++i) {
    const auto [from, to] = children.equal_range(tree[i]);
    for (auto it = from; it != to; ++it) tree.push_back(it->second);
  }
  return tree;
}

// A cgroup v1 CPU quota of `percent` of one core that a running process tree is moved into.
struct CpuQuota {
  std::filesystem::path group = fmt::format("/sys/fs/cgroup/cpu/npu_run_quota_{}", getpid());
  bool made = false;

  explicit CpuQuota(int percent) {
    std::error_code ec;
    std::filesystem::create_directory(group, ec);
    made = !ec && std::filesystem::exists(group / "cpu.cfs_quota_us");
    if (made) std::ofstream(group / "cpu.cfs_quota_us") << percent * 1000 << std::flush;
  }
  void enter() const { std::ofstream(group / "cgroup.procs") << getpid() << std::flush; }
  static void leave() {
    std::ofstream("/sys/fs/cgroup/cpu/cgroup.procs") << getpid() << std::flush;
  }
  void take(pid_t root) const {
    for (const pid_t p : process_tree(root))
      std::ofstream(group / "cgroup.procs") << p << std::flush;
  }
  // The tree under `root` without `root` itself: a node's workers slowed, its agent not.
  void take_children(pid_t root) const {
    const std::vector<pid_t> tree = process_tree(root);
    for (size_t i = 1; i < tree.size(); ++i)
      std::ofstream(group / "cgroup.procs") << tree[i] << std::flush;
  }
  ~CpuQuota() {
    // Whatever is left goes back to the root group first: a group with members stays.
    std::ifstream procs(group / "cgroup.procs");
    for (pid_t p = 0; procs >> p;)
      std::ofstream("/sys/fs/cgroup/cpu/cgroup.procs") << p << std::flush;
    std::error_code ec;
    std::filesystem::remove(group, ec);
  }
};

}  // namespace npu_run::testing
