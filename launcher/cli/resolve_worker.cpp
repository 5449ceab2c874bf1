#include <fmt/format.h>

#include "basics/usage_error.hpp"
#include "cli/resolvers.hpp"
#include "cli/value_parsers.hpp"

namespace npu_run {

void resolve_numa(const LaunchInputs& in, const JobShape& shape, WorkerCommand& worker) {
  const Flag<std::string>& binding = in.options.worker.numa_binding;
  const std::string& text = *binding;
  if (text.empty()) return;
  const std::string source = binding.source();
  const auto mode = parse_numa_mode(text);
  if (!mode) {
    throw UsageError(fmt::format("{} '{}' is not a binding mode; use one of {}", source, text,
                                 kNumaModeChoices));
  }
  const DiscoveredDevices& found = in.host.devices();
  if (found.kind == DeviceKind::kNone) {
    throw UsageError(fmt::format(
        "{} {}: it binds workers near their NPU or GPU, and this host has none ({}); drop the "
        "option for a CPU job",
        source, text, found.description));
  }
  const std::string sys_root = lookup(in.env, "NPU_RUN_SYS_ROOT").value_or("/sys");
  try {
    worker.numa = plan_numa_binding(*mode, found.kind, shape.devices, sys_root, allowed_cpus());
  } catch (const std::runtime_error& e) {
    throw UsageError(fmt::format(
        "{} {}: cannot place the workers: {}; drop the option, or check the devices in sysfs",
        source, text, e.what()));
  }
  worker.numa_mode = mode;
}

namespace {

// --role, --no-python/--module, --virtual-local-rank, and notes for the torchrun options npu_run
// accepts without acting on them.
void resolve_worker_options(const LaunchInputs& in, WorkerCommand& worker) {
  const LaunchOptions& o = in.options;
  const WorkerFlags& f = o.worker;
  check_name(*o.shape.role, o.shape.role.source(), "a role name");
  // CLI11's excludes() sees the command line only; a PET_ variable may clash with a flag.
  if (*f.no_python && (*f.module || *f.run_path))
    throw UsageError(o.exclusion_reason(*f.module ? "--no-python excludes --module"
                                                  : "--no-python excludes --run-path"));
  worker.role = *o.shape.role;
  worker.mode = *f.no_python ? WorkerMode::kExecutable
                : *f.module  ? WorkerMode::kPythonModule
                             : WorkerMode::kPythonScript;
  worker.virtual_local_rank = *f.virtual_local_rank;
  if (*f.virtual_local_rank) {
    const DeviceKind kind = in.host.devices().kind;
    worker.visible_devices_variable = kind == DeviceKind::kAscend   ? "ASCEND_RT_VISIBLE_DEVICES"
                                      : kind == DeviceKind::kNvidia ? "CUDA_VISIBLE_DEVICES"
                                                                    : "";
  }
  const OutputFlags& out = o.output;
  if (*out.event_log_handler != "null") {
    worker.accepted_notes.push_back(fmt::format(
        "{} {}: npu_run has no event handlers; its own log lines record the job's events",
        out.event_log_handler.source(), *out.event_log_handler));
  }
  if (!out.logs_specs->empty()) {
    worker.accepted_notes.push_back(fmt::format(
        "{} {}: npu_run loads no logging plugins; --log-dir, -r and -t choose the log files",
        out.logs_specs.source(), *out.logs_specs));
  }
}

}  // namespace

void resolve_worker(const LaunchInputs& in, const std::vector<std::string>& script_and_args,
                    WorkerCommand& worker) {
  resolve_worker_options(in, worker);
  worker.entrypoint = script_and_args.front();
  worker.args.assign(script_and_args.begin() + 1, script_and_args.end());

  if (worker.mode == WorkerMode::kExecutable) {
    worker.program = in.host.find_program(worker.entrypoint);
    if (worker.program.empty()) {
      throw UsageError(fmt::format(
          "--no-python: '{}' is not an executable file{}; check the path and its execute "
          "permission",
          worker.entrypoint, worker.entrypoint.find('/') == std::string::npos ? " on PATH" : ""));
    }
    return;
  }
  const std::string python = lookup(in.env, "PYTHON_EXEC").value_or("python3");
  worker.program = in.host.find_program(python);
  if (worker.program.empty()) {
    throw UsageError(fmt::format(
        "cannot find the python interpreter '{}'{} (from {}); set PYTHON_EXEC to a python that "
        "has your framework installed, e.g. PYTHON_EXEC=/usr/bin/python3",
        python, python.find('/') == std::string::npos ? " on PATH" : "",
        lookup(in.env, "PYTHON_EXEC") ? "PYTHON_EXEC" : "the default python3"));
  }
  if (worker.mode != WorkerMode::kPythonScript) return;
  // As `python DIR` and `python app.zip` run them: a directory with a __main__.py (a zip is a
  // regular file, and python reports one without __main__.py itself).
  if (in.host.is_directory(worker.entrypoint)) {
    if (in.host.is_regular_file(worker.entrypoint + "/__main__.py")) return;
    throw UsageError(fmt::format(
        "'{}' is a directory without a __main__.py, so python cannot run it; give the training "
        "script inside it, or use -m for a package",
        worker.entrypoint));
  }
  if (!in.host.is_regular_file(worker.entrypoint)) {
    throw UsageError(fmt::format(
        "training script '{}' not found (working directory {}); give its path, or use -m for a "
        "module or --no-python for a program",
        worker.entrypoint, in.host.working_directory()));
  }
}

}  // namespace npu_run
