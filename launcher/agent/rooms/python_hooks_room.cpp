// The Python hooks' room: with no line added to its script, every worker beats once per optimizer
// step (--auto-progress, on by default) and serves torch's worker server, through which a hang,
// `npu_run status --dump` and the straggler watch read its records without killing
// (agent/hangs/worker_server_client.hpp; with --auto-progress off, only under --hang-timeout,
// --exit-timeout or --straggler). The agent writes python/npu_run_auto_progress.py as
// sitecustomize.py into its private directory (beside the progress sockets, gone when the agent
// is) and puts that directory first on each worker's PYTHONPATH; the module runs whatever
// sitecustomize it shadows. Its beats carry kAutomaticBeatMark: a script's own beats replace
// them (workers/progress_beats.hpp). Without the private directory there is nothing to beat to
// and nowhere to serve.
#include <spdlog/spdlog.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "agent/hangs/worker_server_client.hpp"
#include "agent/rooms/agent_rooms.hpp"
#include "agent/rooms/python_hooks_source.hpp"
#include "workers/progress_beats.hpp"

namespace npu_run {
namespace {

void warn_unwritten(const std::string& file, const std::string& why) {
  spdlog::warn(
      "cannot write {} ({}); workers beat only if their scripts do, and a hang's stacks are "
      "taken by SIGABRT",
      file, why);
}

// sitecustomize.py in <agent directory>/python, or "" (with a warning) when it cannot be written.
std::string write_sitecustomize(const std::string& agent_directory) {
  const std::string directory = agent_directory + "/python";
  const std::string file = directory + "/sitecustomize.py";
  std::error_code error;
  std::filesystem::create_directories(directory, error);
  if (error) return warn_unwritten(file, error.message()), "";
  std::ofstream out(file, std::ios::trunc);
  if (!out) return warn_unwritten(file, std::strerror(errno)), "";
  out << kAutoProgressSitecustomize;
  out.close();
  if (!out) return warn_unwritten(file, "the write failed"), "";
  return directory;
}

bool beat_steps(const LaunchConfig& cfg) {
  return cfg.supervision.auto_progress;
}

bool serve(const LaunchConfig& cfg) {
  return beat_steps(cfg) || cfg.supervision.hang.any() ||
         cfg.supervision.straggler.mode != StragglerMode::kOff;
}

class PythonHooksRoom final : public AgentRoom {
 public:
  explicit PythonHooksRoom(const RoomContext& ctx) : cfg_(ctx.cfg) {
    if (ctx.beats == nullptr || !(beat_steps(cfg_) || serve(cfg_))) return;
    if (!write_sitecustomize(ctx.beats->directory()).empty()) directory_ = ctx.beats->directory();
  }

  void starting(std::vector<WorkerSpec>& specs) override {
    if (!directory_.empty()) give_python_hooks_env(specs, cfg_, directory_);
  }

 private:
  const LaunchConfig& cfg_;
  std::string directory_;  // the agent's, where sitecustomize.py was written; empty: no hooks
};

}  // namespace

void give_python_hooks_env(std::vector<WorkerSpec>& specs, const LaunchConfig& cfg,
                           const std::string& agent_directory) {
  if (!(beat_steps(cfg) || serve(cfg))) return;
  for (WorkerSpec& spec : specs) {
    if (serve(cfg))
      set_contract_env(spec, kWorkerServerVariable,
                       worker_server_path(agent_directory, spec.local_rank));
    if (beat_steps(cfg)) set_contract_env(spec, "NPU_RUN_BEAT_STEPS", "1");
    const auto user = spec.env.find("PYTHONPATH");
    std::string path = agent_directory + "/python";
    if (user != spec.env.end() && !user->second.empty()) path += ":" + user->second;
    set_contract_env(spec, "PYTHONPATH", path);
  }
}

std::unique_ptr<AgentRoom> python_hooks_room(const RoomContext& ctx) {
  return std::make_unique<PythonHooksRoom>(ctx);
}

}  // namespace npu_run
