// The agent's private directory: mode 0700 under $TMPDIR or /tmp, named after the agent's pid
// ("npu_run_progress_<pid>_XXXXXX"), holding its workers' progress sockets (NPU_RUN_PROGRESS)
// and the socket `npu_run status` asks on this host. Short enough for a socket's path.
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

namespace npu_run {

// Creates it, first removing those of this user whose agent is gone (a SIGKILLed agent never
// removed its own). Throws std::runtime_error naming every place tried and the fix.
std::string make_agent_directory();
// What make_agent_directory() will make, as the dry run shows it:
// "/tmp/npu_run_progress_<pid>_XXXXXX" (the pid and the six characters are chosen then).
std::string agent_directory_template();

struct AgentDirectory {
  pid_t pid = 0;  // the agent's
  std::string path;
};

// Those of this user's agents that are alive: under $TMPDIR (or /tmp when it is unset), where
// agents make them; with `every_place`, also under /tmp, where an agent whose TMPDIR was
// unusable made its own.
std::vector<AgentDirectory> live_agent_directories(bool every_place);

// Inside an agent's directory: the stream socket `npu_run status` connects to.
inline constexpr const char* kStatusSocketName = "status";
// ... and the one `npu_run status --dump` connects to: the answer comes after every running
// rank's records were collected.
inline constexpr const char* kDumpSocketName = "dump";

}  // namespace npu_run
