// WorkerSpec: the blueprint of one worker (command, environment, where its output goes). The
// agent builds specs (agent/plan/worker_plan.hpp); WorkerGroup turns them into processes.
#pragma once

#include <string>
#include <vector>

#include "basics/environment.hpp"

namespace npu_run {

// Where one standard stream of a worker goes.
enum class StreamSink {
  kInherit,  // the agent's own stdout/stderr, zero copy (the default)
  kFile,     // straight into the rank's log file, zero copy (--redirects)
  kRelay,    // through a pipe read by the agent: log file and/or prefixed console lines (--tee)
  kDiscard,  // /dev/null (filtered out by --local-ranks-filter, no log directory)
};

struct StreamRoute {
  StreamSink sink = StreamSink::kInherit;
  bool to_console = true;
  std::string file;  // empty: no log file
  // msrun's layout (agent/plan/worker_plan.hpp): both streams write one file, each with O_APPEND so
  // that neither overwrites the other's lines; `keep_file`: a restart adds to the file.
  bool shared_file = false;
  bool keep_file = false;
  bool prefixed = true;  // console lines get the rank's prefix (false: relayed only for `filters`)
  // --duplicate-*-filters: lines containing any of these also go to `filtered_file`.
  std::vector<std::string> filters;
  std::string filtered_file;
  // The agent reads the last kStderrTailBytes of this stream when the worker has ended (from
  // the relay, or from the file of a kFile sink): a hang's stack dump is found in it.
  bool keep_tail = false;
};

struct WorkerSpec {
  int local_rank = 0;
  int global_rank = 0;
  int device_id = 0;
  std::string program;            // absolute path exec'd
  std::vector<std::string> argv;  // arguments after the program
  EnvMap env;                     // complete environment of the worker
  EnvMap contract_env;            // the part npu_run sets (for plans and tests)
  StreamRoute out;
  StreamRoute err;
  std::string console_prefix;  // put before each relayed console line
  bool reads_stdin = false;    // local rank 0: the agent's stdin (workers/terminal_input.hpp)
  std::string log_dir;         // attempt_<n>/<local_rank>, empty without a log directory
  std::string error_file;      // TORCHELASTIC_ERROR_FILE
  // --numa-binding: the CPUs it may run on (empty: the agent's) and its preferred memory node.
  std::vector<int> cpus;
  int numa_node = -1;
};

// A variable npu_run gives the worker: in its environment, and in the part plans show.
inline void set_contract_env(WorkerSpec& spec, const std::string& name, const std::string& value) {
  spec.env[name] = value;
  spec.contract_env[name] = value;
}

}  // namespace npu_run
