#include <fmt/format.h>

#include <CLI/CLI.hpp>

#include "basics/usage_error.hpp"
#include "cli/resolvers.hpp"
#include "cli/value_parsers.hpp"

namespace npu_run {

void resolve_supervision(const LaunchInputs& in, SupervisionConfig& supervision,
                         AgentOptions& agent) {
  const LaunchOptions& o = in.options;
  const LaunchFlags& f = o.flags();
  supervision.max_restarts = resolve_max_restarts(f.rdzv, o.rdzv, o.names());
  if (!(f.monitor_interval >= 0)) {
    throw UsageError(fmt::format("{} {}: must be 0 or more seconds", o.source(o.monitor_interval),
                                 f.monitor_interval));
  }
  check_choice(f.start_method, {"spawn", "fork", "forkserver"}, o.source(o.start_method));
  supervision.term_timeout =
      seconds_option(f.term_timeout, 0, 7 * 24 * 3600.0, o.source(o.term_timeout));
  supervision.stop_signals = parse_signals(f.signals_to_handle, o.source(o.signals));
  supervision.hang = parse_hang_timeout(f.hang_timeout, o.source(o.hang_timeout));
  if (f.max_no_progress_restarts < 0 || f.max_no_progress_restarts > 1'000'000) {
    throw UsageError(fmt::format("{} {}: expected a count from 0 (off) to 1000000",
                                 o.source(o.max_no_progress_restarts),
                                 f.max_no_progress_restarts));
  }
  supervision.max_no_progress_restarts = f.max_no_progress_restarts;
  if (f.exit_timeout != 0) {
    supervision.hang.exit_timeout =
        seconds_option(f.exit_timeout, 0.001, 7 * 24 * 3600.0, o.source(o.exit_timeout));
  }
  supervision.stop_with_parent =
      in.cluster.kind == ClusterKind::kMpi || in.cluster.kind == ClusterKind::kSlurm;

  agent.log_level = parse_log_level(f.log_level, o.source(o.log_level));
  if (f.json && !f.dry_run)
    throw UsageError("--json only changes the output of --dry-run; add --dry-run");
  agent.dry_run = f.dry_run;
  agent.json = f.json;
}

}  // namespace npu_run
