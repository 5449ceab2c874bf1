// WorkerSpec: the blueprint of one worker (command, environment, where its output goes), built
// from the LaunchConfig and the Assignment. WorkerGroup turns specs into processes.
#pragma once

#include <string>
#include <vector>

#include "npu_run/assignment.hpp"
#include "npu_run/environment.hpp"
#include "npu_run/launch_config.hpp"

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
  std::string log_dir;         // attempt_<n>/<local_rank>, empty without a log directory
  std::string error_file;      // TORCHELASTIC_ERROR_FILE
};

// Where files of one attempt go: <run_dir>/attempt_<n>/<local_rank>/.
struct AttemptLayout {
  std::string run_dir;     // empty: no log files and no error files
  bool log_files = false;  // false: run_dir only holds error files
  int attempt = 0;
};

std::string attempt_rank_dir(const AttemptLayout& layout, int local_rank);

// One spec per local rank.
std::vector<WorkerSpec> make_worker_specs(const LaunchConfig& cfg, const Assignment& assignment,
                                          const AttemptLayout& layout, const EnvMap& agent_env);

// torchrun's "${local_rank}" substitution in the user's arguments.
std::vector<std::string> substitute_local_rank(const std::vector<std::string>& args,
                                               int local_rank);

}  // namespace npu_run
