#include "cluster/topology_file.hpp"

#include <fmt/format.h>

#include "basics/text.hpp"
#include "basics/usage_error.hpp"

namespace npu_run {

std::vector<std::string> slurm_switches(const std::string& addr, const std::string& pattern) {
  const std::vector<std::string_view> kinds = split(pattern, '.');
  const std::vector<std::string_view> names = split(addr, '.');
  // The node's own name comes last and may hold dots (a domain); the switches' never do.
  if (kinds.empty() || kinds.back() != "node" || names.size() < kinds.size()) return {};
  std::vector<std::string> switches;
  for (size_t i = 0; i + 1 < kinds.size(); ++i) {
    if (kinds[i] != "switch" || names[i].empty()) return {};
    switches.emplace_back(names[i]);
  }
  return switches;
}

namespace {

std::vector<std::string> levels_of(std::string_view path, const std::string& where) {
  std::vector<std::string> levels;
  for (const std::string_view level : split(path, '/')) {
    if (level.empty() || level.size() > 255) {
      throw UsageError(
          fmt::format("{}: '{}' has an empty or overlong level; write the path's "
                      "levels from the top, e.g. pod1/spine0/leaf3",
                      where, path));
    }
    levels.emplace_back(level);
  }
  if (levels.size() > kMaxTopologyLevels) {
    throw UsageError(fmt::format("{}: '{}' has {} levels; at most {} are kept", where, path,
                                 levels.size(), kMaxTopologyLevels));
  }
  return levels;
}

}  // namespace

TopologyFile parse_topology_file(const std::string& text, const std::string& source) {
  TopologyFile file;
  int number = 0;
  for (const std::string_view raw : split(text, '\n')) {
    ++number;
    std::string_view line = trim(raw.substr(0, raw.find('#')));
    if (line.empty()) continue;
    const std::string where = fmt::format("{} line {}", source, number);
    const size_t gap = line.find_first_of(" \t");
    const std::string_view path = gap == std::string_view::npos ? "" : trim(line.substr(gap));
    if (path.empty() || path.find_first_of(" \t") != std::string_view::npos) {
      throw UsageError(
          fmt::format("{}: '{}' is not 'HOST PATH'; write e.g. 'node07 "
                      "pod1/spine0/leaf3', one node per line",
                      where, line));
    }
    const std::string host(line.substr(0, gap));
    if (!file.emplace(host, levels_of(path, where)).second) {
      throw UsageError(fmt::format("{}: {} is listed twice; give each node one line", where, host));
    }
  }
  if (file.empty()) {
    throw UsageError(fmt::format("{} lists no node; write one 'HOST PATH' line per node", source));
  }
  return file;
}

std::optional<std::vector<std::string>> topology_of(const TopologyFile& file,
                                                    const std::vector<std::string>& names) {
  for (const std::string& name : names) {
    if (const auto it = file.find(name); it != file.end()) return it->second;
  }
  return std::nullopt;
}

}  // namespace npu_run
