// --straggler and --straggler-window: the straggler watch's mode and window. replace hands the
// straggler's seat to a spare, so a job without --spares could never act on it: refused rather
// than silently warning.
#include <fmt/format.h>

#include "basics/usage_error.hpp"
#include "cli/resolvers.hpp"
#include "cli/value_parsers.hpp"

namespace npu_run {

void resolve_straggler(const LaunchInputs& in, LaunchConfig& cfg) {
  const SupervisionFlags& f = in.options.supervision;
  StragglerSettings& s = cfg.supervision.straggler;
  s.mode = kStragglerModeNames.parse(*f.straggler, f.straggler.source());
  s.window = seconds_option(*f.straggler_window, 1, 24 * 3600.0, f.straggler_window.source());
  if (s.mode == StragglerMode::kReplace && cfg.shape.spares == 0) {
    throw UsageError(fmt::format(
        "{} replace hands a straggler's seat to a spare, and this job has none; add --spares N "
        "(agents started beyond --nnodes wait as spares), or use {} warn",
        f.straggler.source(), f.straggler.source()));
  }
}

}  // namespace npu_run
