#include "devices/numa_binding.hpp"

#include <fmt/format.h>
#include <sched.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <stdexcept>

#include "basics/enum_table.hpp"
#include "basics/text.hpp"
#include "devices/device_list.hpp"

namespace npu_run {

namespace fs = std::filesystem;

namespace {

std::string read_text(const fs::path& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error(fmt::format("cannot read {}", path.string()));
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return std::string(trim(text));
}

int read_int(const fs::path& path) {
  const std::string text = read_text(path);
  try {
    return std::stoi(text);
  } catch (const std::exception&) {
    throw std::runtime_error(fmt::format("{} holds '{}', not a number", path.string(), text));
  }
}

struct Accelerator {
  std::string address;
  int node = 0;
};

// The PCI functions of `kind`, in address order.
std::vector<Accelerator> accelerators(DeviceKind kind, const fs::path& sys) {
  const std::string vendor = kind == DeviceKind::kAscend ? "0x19e5" : "0x10de";
  const std::string class_prefix = kind == DeviceKind::kAscend ? "0x12" : "0x03";
  std::vector<Accelerator> found;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(sys / "bus/pci/devices", ec)) {
    std::ifstream v(entry.path() / "vendor");
    std::ifstream c(entry.path() / "class");
    std::string vendor_id;
    std::string class_id;
    if (!(v >> vendor_id) || !(c >> class_id)) continue;
    if (vendor_id != vendor || class_id.rfind(class_prefix, 0) != 0) continue;
    // One NUMA machine in two writes -1 here for node 0; that is still node 0.
    found.push_back(
        {entry.path().filename().string(), std::max(0, read_int(entry.path() / "numa_node"))});
  }
  std::sort(found.begin(), found.end(),
            [](const Accelerator& a, const Accelerator& b) { return a.address < b.address; });
  return found;
}

std::set<int> node_cpus(const fs::path& sys, int node, const std::set<int>& allowed) {
  const std::set<int> all =
      parse_cpu_list(read_text(sys / fmt::format("devices/system/node/node{}/cpulist", node)));
  std::set<int> usable;
  std::set_intersection(all.begin(), all.end(), allowed.begin(), allowed.end(),
                        std::inserter(usable, usable.end()));
  if (usable.empty())
    throw std::runtime_error(fmt::format("NUMA node {} has no CPU this agent may use", node));
  return usable;
}

fs::path cpu_dir(const fs::path& sys, int cpu) {
  return sys / fmt::format("devices/system/cpu/cpu{}", cpu);
}

int socket_of(const fs::path& sys, int cpu) {
  return read_int(cpu_dir(sys, cpu) / "topology/physical_package_id");
}

// The CPUs sharing the highest-level data or unified cache with `cpu`.
std::set<int> last_level_cache_of(const fs::path& sys, int cpu) {
  int best_level = -1;
  std::set<int> sharing;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(cpu_dir(sys, cpu) / "cache", ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("index", 0) != 0) continue;
    const std::string type = read_text(entry.path() / "type");
    if (type != "Unified" && type != "Data") continue;
    const int level = read_int(entry.path() / "level");
    if (level <= best_level) continue;
    best_level = level;
    sharing = parse_cpu_list(read_text(entry.path() / "shared_cpu_list"));
  }
  if (sharing.empty())
    throw std::runtime_error(
        fmt::format("no cache information under {}/cache", cpu_dir(sys, cpu).string()));
  return sharing;
}

// CPUs grouped by a key (the lowest CPU of their core or cache), groups in key order.
template <typename KeyOf>
std::map<int, std::set<int>> group_cpus(const std::set<int>& cpus, KeyOf key_of) {
  std::map<int, std::set<int>> groups;
  for (int cpu : cpus) groups[key_of(cpu)].insert(cpu);
  return groups;
}

std::set<int> exclusive_share(const fs::path& sys, int node, const std::set<int>& cpus,
                              int index_on_node, int devices_on_node) {
  const auto cores = group_cpus(cpus, [&](int cpu) {
    return *parse_cpu_list(read_text(cpu_dir(sys, cpu) / "topology/thread_siblings_list")).begin();
  });
  const int count = static_cast<int>(cores.size());
  if (count < devices_on_node) {
    throw std::runtime_error(
        fmt::format("NUMA node {} has {} physical cores for its {} devices: none left to share out",
                    node, count, devices_on_node));
  }
  // Cores that do not divide evenly go one each to the lowest devices, as torch does.
  const int each = count / devices_on_node;
  const int extra = count % devices_on_node;
  const int start = index_on_node * each + std::min(index_on_node, extra);
  const int end = start + each + (index_on_node < extra ? 1 : 0);
  std::set<int> share;
  int i = 0;
  for (const auto& [core, threads] : cores) {
    if (i >= start && i < end) share.insert(threads.begin(), threads.end());
    ++i;
  }
  return share;
}

std::set<int> core_complex_share(const fs::path& sys, const std::set<int>& cpus,
                                 int index_on_node) {
  const auto caches =
      group_cpus(cpus, [&](int cpu) { return *last_level_cache_of(sys, cpu).begin(); });
  std::vector<std::set<int>> ordered;
  for (const auto& [key, group] : caches) ordered.push_back(group);
  // Larger groups first, then lower CPUs: the order torch hands them out in.
  std::stable_sort(ordered.begin(), ordered.end(),
                   [](const auto& a, const auto& b) { return a.size() > b.size(); });
  return ordered[static_cast<size_t>(index_on_node) % ordered.size()];
}

}  // namespace

std::optional<NumaMode> parse_numa_mode(std::string_view text) {
  static constexpr EnumTable<NumaMode, 4> kModes({{{NumaMode::kNode, "node"},
                                                   {NumaMode::kSocket, "socket"},
                                                   {NumaMode::kExclusive, "exclusive"},
                                                   {NumaMode::kCoreComplex, "core-complex"}}});
  return kModes.find(text);
}

std::set<int> parse_cpu_list(std::string_view text) {
  std::set<int> cpus;
  text = trim(text);
  if (text.empty()) return cpus;
  try {
    for (int id : parse_device_list(std::string(text), "cpu list")) cpus.insert(id);
  } catch (const std::exception&) {
    throw std::runtime_error(fmt::format("'{}' is not a CPU list", text));
  }
  return cpus;
}

std::vector<NumaPlacement> split_cpus_evenly(const std::set<int>& allowed, int workers) {
  const std::vector<int> cpus(allowed.begin(), allowed.end());
  std::vector<NumaPlacement> out;
  const size_t n = cpus.size();
  for (size_t w = 0; w < static_cast<size_t>(workers); ++w) {
    NumaPlacement place{-1, {}};
    if (n >= static_cast<size_t>(workers)) {
      // Shares of n / workers CPUs or one more, in order.
      const size_t begin = w * n / static_cast<size_t>(workers);
      const size_t end = (w + 1) * n / static_cast<size_t>(workers);
      place.cpus.assign(cpus.begin() + static_cast<std::ptrdiff_t>(begin),
                        cpus.begin() + static_cast<std::ptrdiff_t>(end));
    } else if (n > 0) {
      place.cpus = {cpus[w % n]};
    }
    out.push_back(std::move(place));
  }
  return out;
}

std::set<int> allowed_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::set<int> cpus;
  if (::sched_getaffinity(0, sizeof(set), &set) != 0) return cpus;
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu)
    if (CPU_ISSET(cpu, &set)) cpus.insert(cpu);
  return cpus;
}

std::vector<NumaPlacement> plan_numa_binding(NumaMode mode, DeviceKind kind,
                                             const std::vector<int>& devices,
                                             const std::string& sys_root,
                                             const std::set<int>& allowed) {
  const fs::path sys(sys_root);
  const std::vector<Accelerator> found = accelerators(kind, sys);
  std::vector<NumaPlacement> placements;
  for (int device : devices) {
    if (device < 0 || device >= static_cast<int>(found.size())) {
      throw std::runtime_error(fmt::format(
          "device {} has no PCI function under {}/bus/pci/devices ({} {} found)", device,
          sys.string(), found.size(), kind == DeviceKind::kAscend ? "NPUs" : "GPUs"));
    }
    const int node = found[static_cast<size_t>(device)].node;
    std::set<int> cpus = node_cpus(sys, node, allowed);
    int index_on_node = 0;
    int devices_on_node = 0;
    for (int other = 0; other < static_cast<int>(found.size()); ++other) {
      if (found[static_cast<size_t>(other)].node != node) continue;
      if (other < device) ++index_on_node;
      ++devices_on_node;
    }
    switch (mode) {
      case NumaMode::kNode:
        break;
      case NumaMode::kSocket: {
        const int socket = socket_of(sys, *cpus.begin());
        const std::set<int> nodes = parse_cpu_list(read_text(sys / "devices/system/node/possible"));
        for (int other : nodes) {
          if (other == node) continue;
          std::set<int> theirs;
          try {
            theirs = node_cpus(sys, other, allowed);
          } catch (const std::runtime_error&) {
            continue;  // a node without CPUs (memory only) belongs to no socket
          }
          if (socket_of(sys, *theirs.begin()) == socket) cpus.insert(theirs.begin(), theirs.end());
        }
        break;
      }
      case NumaMode::kExclusive:
        cpus = exclusive_share(sys, node, cpus, index_on_node, devices_on_node);
        break;
      case NumaMode::kCoreComplex:
        cpus = core_complex_share(sys, cpus, index_on_node);
        break;
    }
    placements.push_back({node, std::vector<int>(cpus.begin(), cpus.end())});
  }
  return placements;
}

}  // namespace npu_run
