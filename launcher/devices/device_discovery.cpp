#include "devices/device_discovery.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <filesystem>

#include "basics/text.hpp"

namespace npu_run {
namespace {

bool all_digits(std::string_view s) {
  return !s.empty() &&
         std::all_of(s.begin(), s.end(), [](unsigned char c) { return std::isdigit(c); });
}

// Applies a visible-devices variable ("0,2,3"): the result keeps the variable's order and drops
// ids that have no device node, as the runtimes do not expose them either. Non-numeric entries
// (CUDA accepts GPU UUIDs) cannot be mapped to ids, so those lists are taken as logical 0..k-1.
std::vector<int> apply_visible(const std::vector<int>& present, const std::string& visible) {
  std::vector<int> ids;
  size_t entries = 0;
  bool numeric = true;
  for (const std::string_view item : split(visible, ',')) {
    if (item.empty()) continue;
    // CUDA stops at the first invalid entry ("-1" hides every device); Ascend does likewise.
    if (item.front() == '-') break;
    ++entries;
    const auto id = parse_integer(item, 0, 1'000'000);
    if (!id) {
      numeric = false;
      continue;
    }
    const bool exists = std::find(present.begin(), present.end(), *id) != present.end();
    if (exists && std::find(ids.begin(), ids.end(), *id) == ids.end())
      ids.push_back(static_cast<int>(*id));
  }
  if (!numeric) {
    ids.clear();
    for (size_t i = 0; i < std::min(entries, present.size()); ++i)
      ids.push_back(static_cast<int>(i));
  }
  return ids;
}

}  // namespace

std::vector<int> numbered_device_nodes(const std::string& dir, const std::string& prefix) {
  std::vector<int> ids;
  std::error_code ec;
  for (std::filesystem::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name.size() <= prefix.size() || name.compare(0, prefix.size(), prefix) != 0) continue;
    const std::string_view number(name.data() + prefix.size(), name.size() - prefix.size());
    // Digits only: "davinci_manager", "nvidiactl" and "nvidia-uvm" are not devices.
    if (!all_digits(number)) continue;
    if (const auto id = parse_integer(number, 0, 1'000'000)) ids.push_back(static_cast<int>(*id));
  }
  std::sort(ids.begin(), ids.end());
  return ids;
}

DiscoveredDevices discover_devices(const EnvMap& env) {
  const std::string root = lookup(env, "NPU_RUN_DEV_ROOT").value_or("/dev");
  struct Probe {
    DeviceKind kind;
    const char* node_prefix;
    const char* visible_var;
    const char* noun;
  };
  for (const Probe& probe :
       {Probe{DeviceKind::kAscend, "davinci", "ASCEND_RT_VISIBLE_DEVICES", "Ascend NPU"},
        Probe{DeviceKind::kNvidia, "nvidia", "CUDA_VISIBLE_DEVICES", "NVIDIA GPU"}}) {
    const std::vector<int> present = numbered_device_nodes(root, probe.node_prefix);
    if (present.empty()) continue;
    DiscoveredDevices found{probe.kind, present, ""};
    std::string restriction;
    if (const auto visible = lookup(env, probe.visible_var)) {
      found.physical_ids = apply_visible(present, *visible);
      restriction = fmt::format(" ({}={})", probe.visible_var, *visible);
    }
    found.description = fmt::format("{} {}{} in {}{}", found.physical_ids.size(), probe.noun,
                                    found.physical_ids.size() == 1 ? "" : "s", root, restriction);
    return found;
  }
  return DiscoveredDevices{
      DeviceKind::kNone, {}, fmt::format("no Ascend or NVIDIA devices in {}", root)};
}

}  // namespace npu_run
