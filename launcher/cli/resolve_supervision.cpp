#include <fmt/format.h>

#include "basics/usage_error.hpp"
#include "cli/resolvers.hpp"
#include "cli/value_parsers.hpp"

namespace npu_run {

void resolve_supervision(const LaunchInputs& in, SupervisionConfig& supervision,
                         AgentOptions& agent) {
  const SupervisionFlags& f = in.options.supervision;
  supervision.max_restarts = resolve_max_restarts(in.options.rdzv);
  if (!(*f.monitor_interval >= 0)) {
    throw UsageError(fmt::format("{} {}: must be 0 or more seconds", f.monitor_interval.source(),
                                 *f.monitor_interval));
  }
  const Flag<std::string>& start_method = in.options.worker.start_method;
  check_choice(*start_method, {"spawn", "fork", "forkserver"}, start_method.source());
  supervision.term_timeout =
      seconds_option(*f.term_timeout, 0, 7 * 24 * 3600.0, f.term_timeout.source());
  supervision.stop_signals = parse_signals(*f.signals_to_handle, f.signals_to_handle.source());
  supervision.hang = parse_hang_timeout(*f.hang_timeout, f.hang_timeout.source());
  check_choice(*f.auto_progress, {"on", "off"}, f.auto_progress.source());
  supervision.auto_progress = *f.auto_progress == "on";
  const int no_progress = *f.max_no_progress_restarts;
  if (no_progress < 0 || no_progress > 1'000'000) {
    throw UsageError(fmt::format("{} {}: expected a count from 0 (off) to 1000000",
                                 f.max_no_progress_restarts.source(), no_progress));
  }
  supervision.max_no_progress_restarts = no_progress;
  if (!f.ledger->empty())
    supervision.ledger.path = *f.ledger;
  else if (!in.options.output.log_dir->empty())
    supervision.ledger.path = *in.options.output.log_dir + "/ledger.jsonl";
  supervision.ledger.ttl =
      seconds_option(*f.ledger_ttl, 1, 365 * 24 * 3600.0, f.ledger_ttl.source());
  supervision.device_release_timeout =
      seconds_option(*f.device_release_timeout, 0, 24 * 3600.0, f.device_release_timeout.source());
  supervision.startup_window =
      seconds_option(*f.startup_window, 0, 7 * 24 * 3600.0, f.startup_window.source());
  if (*f.exit_timeout != 0) {
    supervision.hang.exit_timeout =
        seconds_option(*f.exit_timeout, 0.001, 7 * 24 * 3600.0, f.exit_timeout.source());
  }
  supervision.stop_with_parent =
      in.cluster.kind == ClusterKind::kMpi || in.cluster.kind == ClusterKind::kSlurm;

  const AgentFlags& a = in.options.agent;
  agent.log_level = parse_log_level(*a.log_level, a.log_level.source());
  if (*a.json && !*a.dry_run)
    throw UsageError("--json only changes the output of --dry-run; add --dry-run");
  agent.dry_run = *a.dry_run;
  agent.json = *a.json;
}

}  // namespace npu_run
