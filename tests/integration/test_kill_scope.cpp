// Nothing of a job outlives npu_run, whatever SIGKILL takes it: its pid (test_supervision.cpp),
// its process group (timeout(1), `kill -9 -PGID`, a batch system) or its whole session. The
// guardian leads a session of its own, so it outlives both and ends what the workers started:
// their shells' children and a daemon that left for a session of its own (issue 64).
#include <dirent.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <csignal>
#include <cstdlib>
#include <string>
#include <vector>

#include "support/harness.hpp"

namespace test_kill_scope {

using namespace npu_run::testing;

namespace {

// Each worker ignores SIGTERM and starts a child in its group and a daemon in a session of its
// own (setsid(1) execs in place: the background child leads no group).
NpuRunProcess start_job() {
  return NpuRunProcess({"--nproc-per-node", "2", "--no-python", "/bin/sh", "-c",
                        "trap '' TERM; sleep 60 & setsid sleep 60 & echo ready; wait"},
                       {{kOwnSessionVariable, "1"}});
}

// Until every worker said it is ready and the processes whose end is checked exist: agent,
// guardian, 2 x (sh, sleep, daemon).
void wait_until_running(NpuRunProcess& p) {
  p.wait_for_output("ready", 2, 10s);
  CHECK(wait_for_marker_processes(p.marker(), 2 + 2 * 3, 5s) >= 2 + 2 * 3);
}

// SIGKILL to every process of the session `sid`, as a batch system's or a terminal's end does.
void kill_session(pid_t sid) {
  DIR* proc = ::opendir("/proc");
  REQUIRE(proc != nullptr);
  while (const dirent* entry = ::readdir(proc)) {
    const pid_t pid = static_cast<pid_t>(std::atoi(entry->d_name));
    if (pid > 0 && ::getsid(pid) == sid) ::kill(pid, SIGKILL);
  }
  ::closedir(proc);
}

// Within the 2 s the promise gives, no process of the job is left (the guardian included).
void require_all_gone_soon(NpuRunProcess& p) {
  const Finished f = p.wait(10s);
  CHECK(f.term_signal == SIGKILL);
  const std::vector<pid_t> left = wait_until_no_marker_processes(p.marker(), 2s);
  INFO(describe_processes(left));
  CHECK(left.empty());
  require_no_strays(p);
}

}  // namespace

TEST_CASE("kill scope: SIGKILL to npu_run's process group leaves nothing, daemons included",
          "[integration][supervision]") {
  NpuRunProcess p = start_job();
  wait_until_running(p);
  REQUIRE(::getpgid(p.pid()) == p.pid());
  ::kill(-p.pid(), SIGKILL);
  require_all_gone_soon(p);
}

TEST_CASE("kill scope: SIGKILL to every process of npu_run's session leaves nothing",
          "[integration][supervision]") {
  NpuRunProcess p = start_job();
  wait_until_running(p);
  REQUIRE(::getsid(p.pid()) == p.pid());
  kill_session(p.pid());  // the agent, the workers and their children: all but the daemons
  require_all_gone_soon(p);
}

}  // namespace test_kill_scope
