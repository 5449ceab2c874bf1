#include "workers/escaped_processes.hpp"

#include <fmt/format.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <optional>
#include <random>
#include <set>

#include "workers/child_setup.hpp"
#include "workers/proc_files.hpp"

namespace npu_run {
namespace {}  // namespace

const std::string& agent_mark() {
  static const std::string mark = [] {
    std::random_device random;
    return fmt::format("{}-{:08x}{:08x}", ::getpid(), random(), random());
  }();
  return mark;
}

bool become_child_subreaper() {
  return ::prctl(PR_SET_CHILD_SUBREAPER, 1) == 0;
}

std::vector<EscapedProcess> stop_escaped_processes(const EscapeSweep& sweep) {
  const pid_t self = ::getpid();
  const std::string entry = fmt::format("{}={}", kAgentMarkVariable, sweep.mark);
  std::vector<EscapedProcess> escaped;
  std::set<pid_t> killed;
  for (int pass = 0; pass < 10; ++pass) {
    bool found_new = false;
    std::error_code ec;
    for (const auto& item : std::filesystem::directory_iterator(sweep.proc_root, ec)) {
      const std::string name = item.path().filename().string();
      if (name.empty() ||
          !std::all_of(name.begin(), name.end(), [](char c) { return c >= '0' && c <= '9'; }))
        continue;
      const auto pid = static_cast<pid_t>(std::stol(name));
      if (pid == self || is_helper_process(pid) ||
          std::find(sweep.spare.begin(), sweep.spare.end(), pid) != sweep.spare.end())
        continue;
      const std::string dir = item.path().string();
      const auto stat = read_proc_stat(dir);
      if (!stat) continue;  // gone already
      const bool own_child = stat->parent == self;
      if (stat->state == 'Z' || stat->state == 'X') {
        // Dead: nothing to stop, but an orphan the subreaper inherited must be reaped.
        if (own_child && sweep.children_of_self) (void)::waitpid(pid, nullptr, WNOHANG);
        continue;
      }
      if (killed.contains(pid)) continue;  // killed in an earlier pass, still exiting
      const bool escapee = (own_child && sweep.children_of_self) ||
                           (!sweep.mark.empty() && proc_environ_has(dir, entry));
      if (!escapee) continue;
      EscapedProcess process{pid, proc_command(dir), 0};
      if (::kill(pid, SIGKILL) != 0) process.kill_error = errno;
      if (process.kill_error == ESRCH) continue;  // exited meanwhile
      killed.insert(pid);
      escaped.push_back(std::move(process));
      found_new = true;
    }
    if (!found_new) break;
  }
  // Reap the children among them that died already; one still dying (or stuck in uninterruptible
  // sleep) is never waited for: the next sweep, or init after the agent, reaps it.
  if (sweep.children_of_self) {
    for (const EscapedProcess& p : escaped) {
      if (p.kill_error == 0) (void)::waitpid(p.pid, nullptr, WNOHANG);
    }
  }
  return escaped;
}

std::string describe_escaped(const std::vector<EscapedProcess>& escaped) {
  std::string text =
      fmt::format("{} process{} that left {} worker's process group:", escaped.size(),
                  escaped.size() == 1 ? "" : "es", escaped.size() == 1 ? "its" : "their");
  size_t shown = 0;
  for (const EscapedProcess& p : escaped) {
    if (shown++ == 8) {
      text += fmt::format(" and {} more", escaped.size() - 8);
      break;
    }
    text += fmt::format("{} pid {} ({})", shown == 1 ? "" : ",", p.pid, p.command);
    if (p.kill_error != 0)
      text += fmt::format(" could not be stopped: {}", std::strerror(p.kill_error));
  }
  return text;
}

}  // namespace npu_run
