// Judges of single tool answers: the tool's words, the status, the fix.
#include <fmt/format.h>

#include "basics/text.hpp"
#include "health/node_checks.hpp"

namespace npu_run {

namespace {

HealthFinding finding(std::string check, int device, HealthStatus status, std::string detail,
                      std::string fix = {}) {
  return {std::move(check), device, status, std::move(detail), std::move(fix)};
}

}  // namespace

std::optional<HealthFinding> unanswered(const std::string& check, int device, const ToolRun& run) {
  if (run.busy()) {  // to the end of the retries
    return finding(check, device, HealthStatus::kNotRun,
                   fmt::format("{}: still busy after {} tries", run.command_line(), run.attempts));
  }
  if (run.end == ToolRun::End::kExited) return std::nullopt;
  return finding(check, device, HealthStatus::kNotRun,
                 fmt::format("{}: {}", run.command_line(), run.describe()));
}

HealthFinding judge_link(int device, const ToolRun& run) {
  if (auto none = unanswered("link", device, run)) return *none;
  const auto status = parse_link_status(run.out);
  if (!status) {
    return finding(
        "link", device, HealthStatus::kFail,
        fmt::format("{} printed no link status ({})", run.command_line(), run.describe()));
  }
  if (*status == "UP") return finding("link", device, HealthStatus::kPass, "link status: UP");
  return finding("link", device, HealthStatus::kFail, "link status: " + printable(*status),
                 fmt::format("check the cable, optical module and switch port of device {}; "
                             "`hccn_tool -i {} -link -g` shows the link again",
                             device, device));
}

HealthFinding judge_net_health(int device, const ToolRun& run) {
  if (auto none = unanswered("net_health", device, run)) return *none;
  const auto status = parse_net_health(run.out);
  if (status && (*status == "Success" || *status == "Init")) {
    return finding("net_health", device, HealthStatus::kPass, "net health status: " + *status);
  }
  const std::string said = status ? "net health status: " + printable(*status)
                                  : fmt::format("{} printed no net health status ({})",
                                                run.command_line(), run.describe());
  return finding("net_health", device, HealthStatus::kFail, said,
                 fmt::format("`hccn_tool -i {0} -netdetect -g` names the address it probes; "
                             "`hccn_tool -i {0} -ping -g address ADDRESS` tries it",
                             device));
}

HealthFinding judge_device_ip(int device, const ToolRun& run, std::optional<DeviceAddress>& found) {
  if (auto none = unanswered("ip", device, run)) return *none;
  found = parse_device_ip(run.out);
  if (found) {
    return finding("ip", device, HealthStatus::kPass,
                   fmt::format("ipaddr {} netmask {}", found->address, found->netmask));
  }
  return finding("ip", device, HealthStatus::kFail,
                 fmt::format("no address set on device {} ({})", device, run.describe()),
                 fmt::format("hccn_tool -i {} -ip -s address ADDRESS netmask NETMASK (the "
                             "device's line of /etc/hccn.conf)",
                             device));
}

HealthFinding judge_tls(int device, const ToolRun& run, std::optional<int>& tls_switch) {
  if (auto none = unanswered("tls", device, run)) return *none;
  tls_switch = parse_tls_switch(run.out);
  if (tls_switch) {
    return finding("tls", device, HealthStatus::kPass, fmt::format("tls switch {}", *tls_switch));
  }
  return finding("tls", device, HealthStatus::kSkipped,
                 fmt::format("the TLS switch is not known ({})", run.describe()));
}

HealthFinding judge_chip_health(int device, const ChipMapRow& chip, const ToolRun& run) {
  if (auto none = unanswered("npu_health", device, run)) return *none;
  const auto health = parse_chip_health(run.out);
  const std::string look = fmt::format("npu-smi info -t health -i {} -c {}", chip.npu, chip.chip);
  if (!health || run.code != 0) {
    return finding("npu_health", device, HealthStatus::kFail,
                   fmt::format("{} printed no health status ({})", look, run.describe()));
  }
  if (health->status == "OK") return finding("npu_health", device, HealthStatus::kPass, "OK");
  std::string detail = "health " + printable(health->status);
  if (!health->error_codes.empty()) {
    detail += ", error codes";
    for (const std::string& code : health->error_codes) detail += " " + printable(code);
  }
  if (!health->information.empty()) detail += " (" + printable(health->information) + ")";
  const bool warning = health->status == "Warning";
  return finding("npu_health", device, warning ? HealthStatus::kWarn : HealthStatus::kFail, detail,
                 fmt::format("`{}`; look the codes up in the Ascend fault code manual; `npu-smi "
                             "set -t reset -i {} -c {}` once nothing uses the chip",
                             look, chip.npu, chip.chip));
}

HealthFinding judge_user_check(const ToolRun& run) {
  if (auto none = unanswered("user_check", -1, run)) return *none;
  if (run.code == 0) return finding("user_check", -1, HealthStatus::kPass, "--health-check-cmd");
  return finding("user_check", -1, HealthStatus::kFail,
                 fmt::format("--health-check-cmd {}", run.describe()));
}

}  // namespace npu_run
