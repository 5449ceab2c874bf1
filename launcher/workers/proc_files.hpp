// Reading /proc safely for the agent's sweeps (escaped processes, a hang's stack dump): a
// process may exit while its files are read, and that must never throw or end the agent.
#pragma once

#include <sys/types.h>

#include <optional>
#include <string>

namespace npu_run {

// A /proc file, whole. A process that exits while it is read makes read() fail with ESRCH:
// what was read so far is the answer (std::filebuf would throw from underflow, through an
// istreambuf_iterator, and end the agent). Empty when it cannot be opened.
std::string read_proc_file(const std::string& path);

struct ProcStat {
  char state = '?';
  pid_t parent = 0;
  pid_t group = 0;  // process group
};

// Whether the environment of the process directory `dir` holds `entry` ("NAME=value");
// false when it is not ours to read.
bool proc_environ_has(const std::string& dir, const std::string& entry);

// Its command line, NULs as spaces, cut to 80 bytes; a kernel thread's or zombie's name.
std::string proc_command(const std::string& dir);

// /proc/<pid>/stat of the process directory `dir`; nullopt when it is gone or unreadable.
std::optional<ProcStat> read_proc_stat(const std::string& dir);

}  // namespace npu_run
