#include "support/process_census.hpp"

#include <dirent.h>
#include <poll.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

namespace npu_run::testing {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

int pidfd_open(pid_t pid) {
  return static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
}

std::string new_marker() {
  static std::atomic<int> counter{0};
  std::random_device rd;
  return std::to_string(::getpid()) + "-" + std::to_string(counter++) + "-" + std::to_string(rd());
}

bool thread_blocked_in(pid_t pid, const std::string& wchan) {
  const std::string tasks = "/proc/" + std::to_string(pid) + "/task";
  for (const auto& task : std::filesystem::directory_iterator(
           tasks, std::filesystem::directory_options::skip_permission_denied)) {
    std::ifstream file(task.path() / "wchan");
    std::string current;
    std::getline(file, current);
    if (current.find(wchan) != std::string::npos) return true;
  }
  return false;
}

std::string describe_processes(const std::vector<pid_t>& pids) {
  std::string text;
  for (pid_t pid : pids) {
    const std::string dir = "/proc/" + std::to_string(pid);
    // Through operator<<, which turns a read error (the process exited: ESRCH) into a short
    // read; an istreambuf_iterator would let filebuf's exception through.
    std::ifstream cmdline_file(dir + "/cmdline", std::ios::binary);
    std::stringstream cmdline_text;
    cmdline_text << cmdline_file.rdbuf();
    std::string cmdline = cmdline_text.str();
    std::replace(cmdline.begin(), cmdline.end(), '\0', ' ');
    std::ifstream status(dir + "/status");
    std::string state;
    std::string ppid;
    for (std::string line; std::getline(status, line);) {
      if (line.rfind("State:", 0) == 0) state = line.substr(7);
      if (line.rfind("PPid:", 0) == 0) ppid = line.substr(6);
    }
    // The kernel's wait channel says where a hung process is blocked (futex, pipe, epoll).
    std::ifstream wchan_file(dir + "/wchan");
    std::string wchan;
    std::getline(wchan_file, wchan);
    text += "pid " + std::to_string(pid) + " (" + cmdline + ") state " + state + " ppid " + ppid +
            " wchan " + (wchan.empty() ? "-" : wchan) + "\n";
  }
  return text;
}

std::vector<pid_t> processes_with_marker(const std::string& marker) {
  const std::string needle = std::string(kMarkerVariable) + "=" + marker;
  std::vector<pid_t> found;
  DIR* proc = ::opendir("/proc");
  if (proc == nullptr) return found;
  while (dirent* entry = ::readdir(proc)) {
    char* end = nullptr;
    const long pid = std::strtol(entry->d_name, &end, 10);
    if (*end != '\0' || pid <= 0 || pid == ::getpid()) continue;
    std::ifstream environ(std::string("/proc/") + entry->d_name + "/environ", std::ios::binary);
    std::stringstream content;
    content << environ.rdbuf();
    const std::string env = content.str();
    // Whole entries only: the marker must be followed by the NUL that ends the entry.
    for (auto pos = env.find(needle); pos != std::string::npos; pos = env.find(needle, pos + 1)) {
      const bool starts_entry = pos == 0 || env[pos - 1] == '\0';
      const bool ends_entry = pos + needle.size() == env.size() || env[pos + needle.size()] == '\0';
      if (starts_entry && ends_entry) {
        found.push_back(static_cast<pid_t>(pid));
        break;
      }
    }
  }
  ::closedir(proc);
  return found;
}

size_t wait_for_marker_processes(const std::string& marker, size_t count, milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  size_t found = processes_with_marker(marker).size();
  while (found < count && Clock::now() < deadline) {
    ::usleep(10'000);
    found = processes_with_marker(marker).size();
  }
  return found;
}

std::vector<pid_t> wait_until_no_marker_processes(const std::string& marker, milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  while (true) {
    const std::vector<pid_t> pids = processes_with_marker(marker);
    const auto left = std::chrono::duration_cast<milliseconds>(deadline - Clock::now());
    if (pids.empty() || left <= milliseconds(0)) return pids;
    // Wait for the first of them to exit, then look again (it may have had children).
    std::vector<pollfd> fds;
    for (pid_t p : pids) {
      const int fd = pidfd_open(p);
      if (fd >= 0) fds.push_back({fd, POLLIN, 0});
    }
    if (!fds.empty()) ::poll(fds.data(), fds.size(), static_cast<int>(left.count()));
    for (const pollfd& f : fds) ::close(f.fd);
  }
}

}  // namespace npu_run::testing
