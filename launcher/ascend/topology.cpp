#include "ascend/topology.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "basics/enum_table.hpp"
#include "basics/usage_error.hpp"
#include "devices/device_list.hpp"

namespace npu_run {

namespace {

// The highest physical device id of each series: 8 NPUs per training or A2 server; an A3
// server shows 16 devices (8 NPUs of two dies each).
int max_device_id(Soc soc) {
  return soc == Soc::kAtlasA3 ? 15 : 7;
}

std::string counts_text(const std::vector<int>& per_node) {
  std::vector<std::string> parts;
  for (size_t i = 0; i < per_node.size(); ++i)
    parts.push_back(fmt::format("node {}: {}", i, per_node[i]));
  if (parts.size() > 6) {
    parts.resize(6);
    parts.emplace_back("...");
  }
  return fmt::format("{}", fmt::join(parts, ", "));
}

}  // namespace

namespace {

constexpr EnumTable<Soc, 4> kSocs({{{Soc::kAtlasTraining, "atlas-training"},
                                    {Soc::kAtlasA2, "atlas-a2"},
                                    {Soc::kAtlasA3, "atlas-a3"},
                                    {Soc::kNone, "none"}}});

}  // namespace

Soc parse_soc(const std::string& name, const std::string& source) {
  return kSocs.parse(name, source);
}

std::string soc_name(Soc soc) {
  return std::string(kSocs.name(soc));
}

void check_server_devices(Soc soc, const std::vector<int>& devices) {
  if (soc == Soc::kNone) return;
  const std::string prefix =
      fmt::format("--soc {}: devices {}", soc_name(soc), format_device_list(devices));
  const int max_id = max_device_id(soc);
  for (int d : devices) {
    if (d > max_id) {
      throw UsageError(fmt::format("{}: device {} does not exist on this series (devices 0-{})",
                                   prefix, d, max_id));
    }
  }
  const auto n = static_cast<int>(devices.size());
  if (soc == Soc::kAtlasTraining) {
    if (n != 1 && n != 2 && n != 4 && n != 8) {
      throw UsageError(fmt::format(
          "{}: {} devices per server; this series runs 1, 2, 4 or 8 per server", prefix, n));
    }
    // Devices 0-3 and 4-7 are two separate rings: a 2- or 4-device job must stay inside one.
    if (n == 2 || n == 4) {
      const bool low = std::all_of(devices.begin(), devices.end(), [](int d) { return d <= 3; });
      const bool high = std::all_of(devices.begin(), devices.end(), [](int d) { return d >= 4; });
      if (!low && !high) {
        throw UsageError(fmt::format(
            "{} cross the rings {{0-3}} and {{4-7}}; a {}-device job must stay inside one "
            "ring, e.g. --devices {} or --devices {}",
            prefix, n, n == 4 ? "0-3" : "0,1", n == 4 ? "4-7" : "4,5"));
      }
    }
  } else if (n > max_id + 1) {
    throw UsageError(fmt::format("{}: {} devices per server; this series has at most {}", prefix, n,
                                 max_id + 1));
  }
}

JobTopology check_job_devices(Soc soc, const std::vector<int>& per_node) {
  JobTopology result;
  if (soc == Soc::kNone || per_node.size() < 2) return result;
  const bool same =
      std::all_of(per_node.begin(), per_node.end(), [&](int n) { return n == per_node.front(); });
  if (same) return result;
  if (soc == Soc::kAtlasTraining) {
    result.error = fmt::format(
        "--soc atlas-training: the servers run different device counts ({}); every server of "
        "a multi-server job must run the same 1, 2, 4 or 8 devices",
        counts_text(per_node));
  } else {
    result.warnings.push_back(
        fmt::format("--soc {}: the servers run different device counts ({}); the same count on "
                    "every server is recommended",
                    soc_name(soc), counts_text(per_node)));
  }
  return result;
}

}  // namespace npu_run
