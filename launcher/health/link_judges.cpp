// Judges of the link's history and its optics: warnings, never failures.
#include <fmt/format.h>

#include "basics/text.hpp"
#include "health/node_checks.hpp"

namespace npu_run {

HealthFinding judge_optical(int device, const ToolRun& run) {
  if (auto none = unanswered("optical", device, run)) return *none;
  const auto module = parse_optical(run.out);
  const std::string fix =
      fmt::format("`hccn_tool -i {} -optical -g`; reseat or replace the optical module", device);
  if (!module) {
    if (run.out.find("not supported") != std::string::npos) {
      return {"optical", device, HealthStatus::kSkipped, "not supported on this product", {}};
    }
    return {"optical", device, HealthStatus::kWarn,
            fmt::format("no module state printed ({})", run.describe()), fix};
  }
  if (!module->present) {
    return {"optical", device, HealthStatus::kWarn,
            "no optical module present (expected unless the board uses backplane links)", fix};
  }
  const auto problems = optical_problems(*module);
  if (problems.empty()) return {"optical", device, HealthStatus::kPass, "present", {}};
  std::string detail;
  for (const std::string& problem : problems) {
    detail += (detail.empty() ? "" : "; ") + printable(problem);
  }
  return {"optical", device, HealthStatus::kWarn, detail, fix};
}

HealthFinding judge_link_stat(int device, const ToolRun& run, int flap_window_min) {
  if (auto none = unanswered("link_stat", device, run)) return *none;
  const auto stats = parse_link_stat(run.out);
  if (!stats) {
    return {"link_stat",
            device,
            HealthStatus::kSkipped,
            fmt::format("no link statistics printed ({})", run.describe()),
            {}};
  }
  const auto down = recent_link_down(*stats, int64_t{flap_window_min} * 60);
  if (!down) {
    return {"link_stat",
            device,
            HealthStatus::kPass,
            fmt::format("no link down in the last {} min", flap_window_min),
            {}};
  }
  std::string counts;
  if (stats->down_count)
    counts = fmt::format("; link down count since boot: {}", *stats->down_count);
  return {"link_stat", device, HealthStatus::kWarn,
          fmt::format("the link went down {} min ago ({}){}", (*stats->now - down->time) / 60,
                      down->text, counts),
          fmt::format("a link that flaps fails HCCL mid-job: check the cable and switch port of "
                      "device {}; `hccn_tool -i {} -link_stat -g` lists the changes",
                      device, device)};
}

}  // namespace npu_run
