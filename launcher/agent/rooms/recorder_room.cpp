// The flight recorders' room: unless the user set them, every worker starts with torch's flight
// recorder on (gloo's since torch 2.8, NCCL's) and torch_npu's (HCCL), each dumping into the
// rank's directory of the attempt (<run dir>/attempt_<n>/<local rank>/) rather than /tmp, where
// attempts and jobs would overwrite each other. Variables and defaults: REFERENCE.md section 13.
// torch 1.13 and a torch_npu-less job ignore them.
#include <algorithm>
#include <charconv>
#include <string>
#include <utility>
#include <vector>

#include "agent/hangs/hang_collection.hpp"
#include "agent/rooms/agent_rooms.hpp"
#include "basics/environment.hpp"

namespace npu_run {
namespace {

// Entries each recorder keeps (a ring): a few hundred steps of a job's collectives, at a cost
// under what this machine can measure, even at 10 times as many (docs/BENCHMARKS.md).
constexpr int kRecorderEntries = 2000;
// torch_npu's own default heartbeat (TORCH_HCCL_HEARTBEAT_TIMEOUT_SEC).
constexpr long kHcclHeartbeatSeconds = 600;

// torch_npu's watchdog must fire before HCCL's own execution timeout ends the op, or it dumps
// nothing: with a HCCL_EXEC_TIMEOUT at or under its default heartbeat, four fifths of it.
std::string hccl_heartbeat_seconds(const EnvMap& env) {
  const auto exec = env.find("HCCL_EXEC_TIMEOUT");
  long seconds = 0;
  if (exec != env.end()) {
    const std::string& text = exec->second;
    const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), seconds);
    if (error != std::errc() || end != text.data() + text.size()) seconds = 0;
  }
  if (seconds <= 0 || seconds > kHcclHeartbeatSeconds) return "";
  return std::to_string(std::max(1L, seconds * 4 / 5));
}

// The variables for one rank whose attempt directory is `dir`.
std::vector<std::pair<std::string, std::string>> recorder_env(const std::string& dir,
                                                              const EnvMap& env) {
  const std::string entries = std::to_string(kRecorderEntries);
  std::vector<std::pair<std::string, std::string>> vars{
      {"TORCH_FR_BUFFER_SIZE", entries},
      {"TORCH_NCCL_TRACE_BUFFER_SIZE", entries},  // its older name
      {"TORCH_FR_DUMP_TEMP_FILE", dir + "/fr_trace_rank_"},
      {"TORCH_NCCL_DEBUG_INFO_TEMP_FILE", dir + "/fr_trace_rank_"},
      {"TORCH_HCCL_ENABLE_MONITORING", "1"},
      {"TORCH_HCCL_TRACE_BUFFER_SIZE", entries},
      {"TORCH_HCCL_DUMP_ON_TIMEOUT", "1"},
      {"TORCH_HCCL_DEBUG_INFO_TEMP_FILE", dir + "/hccl_trace_rank_"},
      // Pipes the watchdogs read: a line written there dumps the recorder (agent/hang_collection).
      {"TORCH_HCCL_DEBUG_INFO_PIPE_FILE", dir + "/" + kHcclDumpPipePrefix},
      {"TORCH_NCCL_DEBUG_INFO_PIPE_FILE", dir + "/" + kNcclDumpPipePrefix},
  };
  if (const std::string heartbeat = hccl_heartbeat_seconds(env); !heartbeat.empty())
    vars.emplace_back("TORCH_HCCL_HEARTBEAT_TIMEOUT_SEC", heartbeat);
  return vars;
}

// torch reads each of these under two names, the newer first: a user who set either chose.
constexpr std::pair<const char*, const char*> kSpellings[] = {
    {"TORCH_FR_BUFFER_SIZE", "TORCH_NCCL_TRACE_BUFFER_SIZE"},
    {"TORCH_FR_DUMP_TEMP_FILE", "TORCH_NCCL_DEBUG_INFO_TEMP_FILE"},
};

bool chosen(const EnvMap& env, const std::string& name) {
  if (env.count(name) > 0) return true;
  for (const auto& [newer, older] : kSpellings) {
    if ((name == newer || name == older) && (env.count(newer) > 0 || env.count(older) > 0))
      return true;
  }
  return false;
}

class RecorderRoom final : public AgentRoom {
 public:
  void starting(std::vector<WorkerSpec>& specs) override { give_recorder_env(specs); }
};

}  // namespace

void give_recorder_env(std::vector<WorkerSpec>& specs) {
  for (WorkerSpec& spec : specs) {
    if (spec.log_dir.empty()) continue;  // no run directory: nowhere of the job's to dump
    const EnvMap given = spec.env;       // the user's, or the agent's environment's
    for (auto& [name, value] : recorder_env(spec.log_dir, spec.env)) {
      if (chosen(given, name)) continue;
      spec.env[name] = value;
      spec.contract_env[name] = std::move(value);
    }
  }
}

std::unique_ptr<AgentRoom> recorder_room(const RoomContext& /*ctx*/) {
  return std::make_unique<RecorderRoom>();
}

}  // namespace npu_run
