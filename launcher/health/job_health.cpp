#include "health/job_health.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

namespace npu_run {

namespace {

// Names a few nodes, enough to act on; a job of thousands must not print thousands.
constexpr size_t kNamed = 8;

std::string some_of(const std::vector<std::string>& labels) {
  std::vector<std::string> shown(
      labels.begin(), labels.begin() + static_cast<long>(std::min(kNamed, labels.size())));
  std::string text = fmt::format("{}", fmt::join(shown, ", "));
  if (labels.size() > shown.size())
    text += fmt::format(" and {} more", labels.size() - shown.size());
  return text;
}

// The value most entries have; on a tie, the one seen first.
template <typename Value>
Value majority(const std::vector<Value>& values) {
  std::map<Value, size_t> counts;
  for (const Value& v : values) ++counts[v];
  Value best = values.front();
  for (const Value& v : values) {
    if (counts[v] > counts[best]) best = v;
  }
  return best;
}

void check_tls(const std::vector<JobNode>& nodes, JobHealth& health) {
  std::vector<int> all;
  for (const JobNode& node : nodes) {
    for (const auto& [device, value] : node.verdict->tls_switch) all.push_back(value);
  }
  if (all.empty() || std::all_of(all.begin(), all.end(), [&](int v) { return v == all[0]; }))
    return;
  const int usual = majority(all);
  std::vector<std::string> odd_nodes;
  for (size_t i = 0; i < nodes.size(); ++i) {
    std::vector<int> odd;
    int value = usual;
    for (const auto& [device, v] : nodes[i].verdict->tls_switch) {
      if (v != usual) {
        odd.push_back(device);
        value = v;
      }
    }
    if (odd.empty()) continue;
    odd_nodes.push_back(nodes[i].label);
    health.failures[i].push_back(fmt::format(
        "tls: the TLS switch is {} on devices {} of this node but {} on {} other devices of the "
        "job: HCCL's links between them time out (EI0006) (fix: `hccn_tool -i N -tls -s enable "
        "{}` on each of those devices)",
        value, fmt::join(odd, ","), usual, std::count(all.begin(), all.end(), usual), usual));
  }
  health.warnings.push_back(fmt::format("the TLS switch differs: {} on {} ({} elsewhere)",
                                        usual == 0 ? 1 : 0, some_of(odd_nodes), usual));
}

void check_setting(const std::string& name, const std::vector<JobNode>& nodes, bool strict,
                   JobHealth& health) {
  std::vector<std::string> values;
  for (const JobNode& node : nodes) {
    const auto found = node.verdict->settings.find(name);
    values.push_back(found == node.verdict->settings.end() ? "" : found->second);
  }
  if (std::all_of(values.begin(), values.end(), [&](const auto& v) { return v == values[0]; }))
    return;
  const std::string usual = majority(values);
  const auto shown = [](const std::string& v) { return v.empty() ? std::string("unset") : v; };
  std::vector<std::string> odd;
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (values[i] == usual) continue;
    odd.push_back(fmt::format("{} on {}", shown(values[i]), nodes[i].label));
    if (strict) {
      health.failures[i].push_back(
          fmt::format("consistency: {} is {} here but {} on the other nodes (--strict-consistency)",
                      name, shown(values[i]), shown(usual)));
    }
  }
  health.warnings.push_back(
      fmt::format("{} differs between nodes: {} on {} of {} nodes; {}", name, shown(usual),
                  std::count(values.begin(), values.end(), usual), nodes.size(), some_of(odd)));
}

}  // namespace

JobHealth check_job_health(const std::vector<JobNode>& nodes, bool strict) {
  JobHealth health;
  if (nodes.empty()) return health;
  check_tls(nodes, health);
  std::vector<std::string> names;
  for (const JobNode& node : nodes) {
    for (const auto& [name, value] : node.verdict->settings) {
      if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
    }
  }
  std::sort(names.begin(), names.end());
  for (const std::string& name : names) check_setting(name, nodes, strict, health);
  return health;
}

}  // namespace npu_run
