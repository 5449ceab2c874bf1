#include <fmt/format.h>

#include "basics/usage_error.hpp"
#include "cli/resolvers.hpp"
#include "cli/value_parsers.hpp"
#include "health/tool_paths.hpp"

namespace npu_run {

void resolve_health(const LaunchInputs& in, HealthGateSettings& health) {
  const HealthFlags& f = in.options.health;
  check_choice(*f.health_check, {"auto", "gate", "warn", "off"}, f.health_check.source());
  health.user_check = *f.health_check_cmd;
  health.run = parse_health_timeout(*f.health_timeout, f.health_timeout.source());
  health.recheck = seconds_option(*f.health_recheck, 1, 24 * 3600.0, f.health_recheck.source());
  if (*f.health_flap_window < 1 || *f.health_flap_window > 24 * 60) {
    throw UsageError(fmt::format("{} {}: give minutes between 1 and 1440",
                                 f.health_flap_window.source(), *f.health_flap_window));
  }
  health.flap_window_min = *f.health_flap_window;
  health.strict_consistency = *f.strict_consistency;
  if (!f.health_failed_hosts->empty())
    health.failed_hosts_file = in.host.absolute(*f.health_failed_hosts);
  health.mode_chosen = *f.health_check != "auto";
  if (health.mode_chosen) {
    health.mode = kHealthModeNames.parse(*f.health_check, f.health_check.source());
    return;
  }
  // auto: gate where there is something to check with.
  const HealthToolPaths tools = locate_health_tools(
      lookup(in.env, "PATH").value_or(""),
      [&](const std::string& path) { return !in.host.find_program(path).empty(); });
  const bool any_tool =
      !tools.npu_smi.empty() || !tools.hccn_tool.empty() || !tools.nvidia_smi.empty();
  health.mode = any_tool || !health.user_check.empty() ? HealthMode::kGate : HealthMode::kOff;
}

}  // namespace npu_run
