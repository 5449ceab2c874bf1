// Where nodes sit, as a scheduler or an administrator says it (agent/health/topology_probe.hpp
// reads the rest from the devices): Slurm's topology address, and a --topology file.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace npu_run {

// SLURM_TOPOLOGY_ADDR ("s0.s3.node07") read with SLURM_TOPOLOGY_ADDR_PATTERN
// ("switch.switch.node"): the switches from the top down. Empty without a tree (the pattern is
// just "node"), and when the two disagree.
std::vector<std::string> slurm_switches(const std::string& addr, const std::string& pattern);

// A --topology file: one node per line, "HOST PATH" where PATH's levels are separated by '/'
// from the top ("pod1/spine0/leaf3"); blank lines and '#' comments are skipped. Host names,
// short names or addresses. Throws UsageError naming `source`, the line and the fix.
using TopologyFile = std::map<std::string, std::vector<std::string>>;
TopologyFile parse_topology_file(const std::string& text, const std::string& source);

// The levels of the first of `names` (host name, short name, addresses) the file lists.
std::optional<std::vector<std::string>> topology_of(const TopologyFile& file,
                                                    const std::vector<std::string>& names);

inline constexpr size_t kMaxTopologyFileBytes = size_t{4} * 1024 * 1024;
inline constexpr size_t kMaxTopologyLevels = 8;

}  // namespace npu_run
