#include "workers/agent_directory.hpp"

#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <stdexcept>

namespace npu_run {
namespace {

// sun_path holds 108 bytes with its terminating NUL; "/<rank>" or "/status" follows the
// directory.
constexpr size_t kMaxDirectory = 96;

constexpr std::string_view kPrefix = "npu_run_progress_";

std::vector<std::string> bases() {
  std::vector<std::string> out;
  if (const char* tmp = std::getenv("TMPDIR"); tmp != nullptr && *tmp != '\0')
    out.emplace_back(tmp);
  if (out.empty() || out.front() != "/tmp") out.emplace_back("/tmp");
  return out;
}

// Calls `each` with the pid and path of every agent directory of this user under `base`.
void for_each_directory(const std::string& base,
                        const std::function<void(pid_t, const std::filesystem::path&)>& each) {
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(base, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind(kPrefix, 0) != 0) continue;
    const auto end = name.find('_', kPrefix.size());
    if (end == std::string::npos) continue;
    const long pid = std::strtol(name.c_str() + kPrefix.size(), nullptr, 10);
    struct stat info {};
    if (pid <= 0 || ::lstat(entry.path().c_str(), &info) != 0 || !S_ISDIR(info.st_mode) ||
        info.st_uid != ::geteuid())
      continue;
    each(static_cast<pid_t>(pid), entry.path());
  }
}

bool alive(pid_t pid) {
  return ::kill(pid, 0) == 0 || errno != ESRCH;
}

// An agent that was SIGKILLed (the OOM killer) never removed its directory: those of this
// user whose agent is gone are removed when the next agent starts. A reused pid only keeps a
// stale directory a little longer.
void remove_stale_directories(const std::string& base) {
  for_each_directory(base, [](pid_t pid, const std::filesystem::path& path) {
    if (alive(pid)) return;
    std::error_code ignored;
    std::filesystem::remove_all(path, ignored);
  });
}

}  // namespace

std::string agent_directory_template() {
  return fmt::format("{}/{}<pid>_XXXXXX", bases().front(), kPrefix);
}

std::string make_agent_directory() {
  std::vector<std::string> errors;  // one per place tried
  for (const std::string& base : bases()) {
    remove_stale_directories(base);
    std::string pattern = fmt::format("{}/{}{}_XXXXXX", base, kPrefix, ::getpid());
    if (pattern.size() > kMaxDirectory) {
      errors.push_back(fmt::format("{}: too long for a socket's path", base));
      continue;
    }
    if (::mkdtemp(pattern.data()) != nullptr) return pattern;  // mode 0700
    errors.push_back(fmt::format("{}: {}", base, std::strerror(errno)));
  }
  throw std::runtime_error(fmt::format(
      "cannot create a directory for the progress sockets ({}); set TMPDIR to a writable "
      "directory whose path is shorter than {} characters",
      fmt::join(errors, "; "), kMaxDirectory - 36));
}

std::vector<AgentDirectory> live_agent_directories(bool every_place) {
  std::vector<AgentDirectory> out;
  std::vector<std::string> places = bases();
  if (!every_place) places.resize(1);
  for (const std::string& base : places) {
    for_each_directory(base, [&](pid_t pid, const std::filesystem::path& path) {
      if (alive(pid)) out.push_back(AgentDirectory{pid, path.string()});
    });
  }
  return out;
}

}  // namespace npu_run
