// Finding a test's processes through /proc: everything npu_run leads to carries a marker
// environment variable, so a test can prove that none is left behind without knowing their
// names or pids.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <string>
#include <vector>

namespace npu_run::testing {

inline constexpr const char* kMarkerVariable = "NPU_RUN_TEST_MARKER";

// A marker no other test (of this process or another) uses.
std::string new_marker();

// Processes (other than this test) whose environment carries `marker`.
std::vector<pid_t> processes_with_marker(const std::string& marker);

// Waits until at least `count` processes carry `marker`; returns how many do at the end. Checks
// /proc every 10 ms: nothing signals that a grandchild finished exec (whose environment reads
// as empty while it is being replaced).
size_t wait_for_marker_processes(const std::string& marker, size_t count,
                                 std::chrono::milliseconds timeout);

// Waits, on pidfd events, until no process carries `marker`; returns those left after `timeout`.
std::vector<pid_t> wait_until_no_marker_processes(const std::string& marker,
                                                  std::chrono::milliseconds timeout);

// "pid 123 (sleep 60) state S ppid 1 wchan ..." per process, for failure messages.
std::string describe_processes(const std::vector<pid_t>& pids);

// True when a thread of `pid` sleeps in a kernel function whose name contains `wchan`
// ("pipe_write" matches anon_pipe_write on newer kernels).
bool thread_blocked_in(pid_t pid, const std::string& wchan);

// pidfd_open(2), which glibc 2.36 wraps but older test machines' headers may not.
int pidfd_open(pid_t pid);

}  // namespace npu_run::testing
