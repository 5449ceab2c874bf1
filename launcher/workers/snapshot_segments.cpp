#include "workers/snapshot_segments.hpp"

#include <fmt/format.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <stdexcept>

namespace npu_run {
namespace {

constexpr std::string_view kSegmentPrefix = "npu_run_snapshots_";

// The agent's pid in a mark ("<pid>-<random>"), or 0.
pid_t pid_of(std::string_view mark) {
  const size_t dash = mark.find('-');
  if (dash == std::string_view::npos) return 0;
  pid_t pid = 0;
  for (const char c : mark.substr(0, dash)) {
    if (c < '0' || c > '9') return 0;
    pid = pid * 10 + (c - '0');
  }
  return pid;
}

// Those of this user whose agent is gone.
void sweep_dead_agents() {
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(kSegmentRoot, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind(kSegmentPrefix, 0) != 0) continue;
    struct stat st {};
    if (::lstat(entry.path().c_str(), &st) != 0 || st.st_uid != ::geteuid()) continue;
    const pid_t pid = pid_of(std::string_view(name).substr(kSegmentPrefix.size()));
    if (pid <= 0 || ::kill(pid, 0) == 0 || errno != ESRCH) continue;
    remove_segment_directory(entry.path().string());
  }
}

}  // namespace

std::string segment_directory_for(const std::string& mark) {
  return fmt::format("{}/{}{}", kSegmentRoot, kSegmentPrefix, mark);
}

std::string make_segment_directory(const std::string& mark) {
  sweep_dead_agents();
  const std::string directory = segment_directory_for(mark);
  if (::mkdir(directory.c_str(), 0700) != 0 && errno != EEXIST) {
    throw std::runtime_error(fmt::format(
        "cannot make {} for the snapshots in memory: {} (npu_run_checkpoint needs a writable {}, "
        "the shared-memory file system)",
        directory, std::strerror(errno), kSegmentRoot));
  }
  return directory;
}

void remove_segment_directory(const std::string& directory) {
  std::error_code ignored;
  std::filesystem::remove_all(directory, ignored);
}

uint64_t free_bytes_under(const std::string& directory) {
  struct statvfs vfs {};
  if (::statvfs(directory.c_str(), &vfs) != 0) return 0;
  return static_cast<uint64_t>(vfs.f_bavail) * vfs.f_frsize;
}

uint64_t memory_available() {
  std::ifstream in("/proc/meminfo");
  std::map<std::string, uint64_t> kb;
  std::string name;
  uint64_t value = 0;
  std::string unit;
  while (in >> name >> value) {
    std::getline(in, unit);
    kb[name] = value;
  }
  if (kb.count("MemAvailable:")) return kb["MemAvailable:"] * 1024;
  return (kb["MemFree:"] + kb["Cached:"]) * 1024;
}

}  // namespace npu_run
