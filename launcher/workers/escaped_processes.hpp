// Processes that left their worker's process group: a daemon's setsid and double fork,
// subprocess's start_new_session=True, setpgid. Stopping a worker's group does not reach them,
// so without this they outlive the job, holding ports, devices and files (a daemon that kept
// the held port listening made the next job on that port join it and wait 900 s).
//
// Two ways to find them, both from /proc: every worker's environment carries this agent's mark,
// which its descendants inherit whatever group or session they move to; and the agent is a
// child subreaper (PR_SET_CHILD_SUBREAPER), so an orphaned descendant becomes the agent's child
// even if it cleared its environment. The guardian uses the mark alone, after the agent died.
#pragma once

#include <sys/types.h>

#include <string>
#include <string_view>
#include <vector>

namespace npu_run {

// The variable every worker gets (docs/ARCHITECTURE.md, worker environment).
inline constexpr std::string_view kAgentMarkVariable = "NPU_RUN_AGENT_MARK";
// This agent's mark, unique on the host: "<pid>-<random hex>". Made once, before the guardian
// forks, so that both know the same value.
const std::string& agent_mark();

// Makes this process the child subreaper of its descendants; false where the kernel refuses.
bool become_child_subreaper();

struct EscapedProcess {
  pid_t pid = -1;
  std::string command;  // its command line, shortened
  int kill_error = 0;   // errno of kill(2); 0: SIGKILL was sent
};

struct EscapeSweep {
  std::string mark;               // empty: none
  bool children_of_self = false;  // also every child of this process (when it is a subreaper)
  std::vector<pid_t> spare;       // children that are not escapees (the guardian)
  std::string proc_root = "/proc";
};

// SIGKILLs every process the sweep finds, in passes until a pass finds nothing new (at most
// ten: one may fork while a pass runs), and reaps the zombies among this process's children
// that are not in `spare`. Called when no worker of the attempt runs any more.
std::vector<EscapedProcess> stop_escaped_processes(const EscapeSweep& sweep);

// One log line's worth: "2 processes that left their worker's process group: pid 12 (sleep
// 100), pid 13 (...)"; those that could not be killed are named with the reason.
std::string describe_escaped(const std::vector<EscapedProcess>& escaped);

}  // namespace npu_run
