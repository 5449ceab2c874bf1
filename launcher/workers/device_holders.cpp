#include "workers/device_holders.hpp"

#include <dirent.h>
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <filesystem>

#include "workers/proc_files.hpp"

namespace npu_run {

namespace {

std::string link_target(const std::string& path) {
  std::array<char, 512> buffer{};
  const ssize_t n = ::readlink(path.c_str(), buffer.data(), buffer.size() - 1);
  return n > 0 ? std::string(buffer.data(), static_cast<size_t>(n)) : std::string();
}

std::vector<pid_t> all_pids(const std::string& proc_root) {
  std::vector<pid_t> pids;
  DIR* dir = ::opendir(proc_root.c_str());
  if (dir == nullptr) return pids;
  while (const dirent* entry = ::readdir(dir)) {
    char* end = nullptr;
    const long pid = std::strtol(entry->d_name, &end, 10);
    if (end != entry->d_name && *end == '\0' && pid > 0) pids.push_back(static_cast<pid_t>(pid));
  }
  ::closedir(dir);
  return pids;
}

// The devices `pid` holds, each once.
std::vector<std::string> held_by(const std::string& dir, const std::vector<std::string>& devices) {
  std::vector<std::string> held;
  DIR* fds = ::opendir((dir + "/fd").c_str());
  if (fds == nullptr) return held;  // gone, or not ours to look into
  while (const dirent* entry = ::readdir(fds)) {
    if (entry->d_name[0] == '.') continue;
    const std::string target = link_target(dir + "/fd/" + entry->d_name);
    if (std::find(devices.begin(), devices.end(), target) != devices.end() &&
        std::find(held.begin(), held.end(), target) == held.end())
      held.push_back(target);
  }
  ::closedir(fds);
  return held;
}

// The job's: this agent's child, or a process that carries its mark.
bool is_ours(const HolderSearch& search, const std::string& dir) {
  const auto stat = read_proc_stat(dir);
  return (stat && stat->parent == search.self) ||
         (!search.mark.empty() && proc_environ_has(dir, search.mark));
}

}  // namespace

std::vector<DeviceHolder> find_device_holders(const HolderSearch& search) {
  std::vector<DeviceHolder> holders;
  if (search.devices.empty()) return holders;
  for (const pid_t pid : all_pids(search.proc_root)) {
    if (pid == search.self) continue;
    const std::string dir = fmt::format("{}/{}", search.proc_root, pid);
    const std::vector<std::string> held = held_by(dir, search.devices);
    if (held.empty()) continue;
    const bool ours = is_ours(search, dir);
    for (const std::string& device : held)
      holders.push_back(DeviceHolder{pid, device, proc_command(dir), ours});
  }
  return holders;
}

DeviceHolder reported_holder(const HolderSearch& search, pid_t pid, const std::string& device,
                             const std::string& reported_name) {
  const std::string dir = fmt::format("{}/{}", search.proc_root, pid);
  std::string command = proc_command(dir);
  // A pid of another pid namespace (npu-smi names the host's inside a container).
  if (command.empty()) command = reported_name.empty() ? "not visible here" : reported_name;
  return DeviceHolder{pid, device, command, pid != search.self && is_ours(search, dir)};
}

std::vector<std::string> device_nodes(const std::string& dev_root,
                                      const std::vector<int>& devices) {
  std::error_code ec;
  // The links in /proc name the node's real path: no symlink or "..", as the root may have.
  std::string root = std::filesystem::weakly_canonical(dev_root, ec).string();
  if (ec || root.empty()) root = dev_root;
  bool davinci = false;
  for (const auto& entry : std::filesystem::directory_iterator(root, ec)) {
    if (entry.path().filename().string().rfind("davinci", 0) == 0) davinci = true;
  }
  const bool nvidia = !davinci && std::filesystem::exists(root + "/nvidia0", ec);
  std::vector<std::string> nodes;
  if (!davinci && !nvidia) return nodes;
  for (const int id : devices)
    nodes.push_back(fmt::format("{}/{}{}", root, davinci ? "davinci" : "nvidia", id));
  return nodes;
}

std::string describe(const DeviceHolder& h) {
  return fmt::format("device {} is held by pid {} ({}){}", h.device, h.pid, h.command,
                     h.ours ? ", a leftover of this job" : "");
}

}  // namespace npu_run
