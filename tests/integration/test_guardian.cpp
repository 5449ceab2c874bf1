// The guardian (workers/guardian.hpp) after its agent is SIGKILLed: what carries the agent's
// mark is ended even when no worker is registered any more. A session's SIGKILL reaches the
// agent's processes one by one: the workers may end, and be forgotten, a moment before the
// agent does, and a daemon they started (in a session of its own, out of every registered
// group) must go all the same (the kill-scope case that found it: test_kill_scope.cpp).
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <csignal>
#include <string>
#include <vector>

#include "support/process_census.hpp"
#include "workers/escaped_processes.hpp"
#include "workers/guardian.hpp"

namespace test_guardian {

using namespace npu_run::testing;
using namespace std::chrono_literals;

TEST_CASE("guardian: an agent SIGKILLed with no worker registered leaves no daemon of its mark",
          "[integration][supervision]") {
  const std::string marker = new_marker();
  int ready[2];
  REQUIRE(::pipe(ready) == 0);
  // The agent: a child of the test with a guardian; its daemon carries its mark and the test's
  // marker, in a session of its own; no worker group is registered (or all were forgotten).
  const pid_t agent = ::fork();
  REQUIRE(agent >= 0);
  if (agent == 0) {
    ::close(ready[0]);
    const npu_run::Guardian guardian;
    const std::string mark = std::string(npu_run::kAgentMarkVariable) + "=" + npu_run::agent_mark();
    const std::string test_marker = std::string(kMarkerVariable) + "=" + marker;
    const pid_t daemon = ::fork();
    if (daemon == 0) {
      (void)::setsid();
      char* const argv[] = {const_cast<char*>("sleep"), const_cast<char*>("60"), nullptr};
      char* const envp[] = {const_cast<char*>(mark.c_str()), const_cast<char*>(test_marker.c_str()),
                            nullptr};
      ::execve("/bin/sleep", argv, envp);
      ::_exit(127);
    }
    const char one = 1;
    (void)::write(ready[1], &one, 1);
    while (true) ::pause();  // until the test's SIGKILL: no destructor runs
  }
  ::close(ready[1]);
  char byte = 0;
  REQUIRE(::read(ready[0], &byte, 1) == 1);
  ::close(ready[0]);
  REQUIRE(wait_for_marker_processes(marker, 1, 5s) >= 1);
  ::kill(agent, SIGKILL);
  int status = 0;
  REQUIRE(::waitpid(agent, &status, 0) == agent);
  const std::vector<pid_t> left = wait_until_no_marker_processes(marker, 2s);
  INFO(describe_processes(left));
  CHECK(left.empty());
  for (const pid_t pid : left) ::kill(pid, SIGKILL);
}

}  // namespace test_guardian
