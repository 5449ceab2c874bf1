// --preflight: the pre-flight probe's mode, and the python it runs with. The probe is torch's
// (python/npu_run_preflight.py), run by the interpreter the workers use (PYTHON_EXEC, else
// python3), so that it measures the job's own framework build and backend; a job whose workers
// run MindSpore or TensorFlow has no torch to probe with.
#include <fmt/format.h>

#include "basics/usage_error.hpp"
#include "cli/resolvers.hpp"

namespace npu_run {

void resolve_preflight(const LaunchInputs& in, LaunchConfig& cfg) {
  const HealthFlags& f = in.options.health;
  HealthGateSettings& health = cfg.health;
  health.preflight = kPreflightModeNames.parse(*f.preflight, f.preflight.source());
  if (health.preflight == PreflightMode::kOff) return;
  if (cfg.worker.framework != Framework::kTorch) {
    throw UsageError(fmt::format(
        "{} {}: the pre-flight probe is a torch benchmark, and {} workers have no torch "
        "process group to probe with; drop {} (the health gate still checks the devices)",
        f.preflight.source(), *f.preflight,
        cfg.worker.framework == Framework::kMindSpore ? "MindSpore" : "TensorFlow",
        f.preflight.source()));
  }
  if (cfg.worker.mode != WorkerMode::kExecutable) {
    health.preflight_python = cfg.worker.program;  // resolve_worker found it
    return;
  }
  // --no-python: the program may be anything; the probe still needs torch's python.
  const std::string python = lookup(in.env, "PYTHON_EXEC").value_or("python3");
  health.preflight_python = in.host.find_program(python);
  if (health.preflight_python.empty()) {
    throw UsageError(fmt::format(
        "{} {} with --no-python: the probe runs torch under python, and '{}' (from {}) is not "
        "found; set PYTHON_EXEC to a python with torch, or drop {}",
        f.preflight.source(), *f.preflight, python,
        lookup(in.env, "PYTHON_EXEC") ? "PYTHON_EXEC" : "the default python3",
        f.preflight.source()));
  }
}

}  // namespace npu_run
