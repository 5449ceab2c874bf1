#include "health/device_pings.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>

namespace npu_run {

namespace {

// The ring's next node first, then halves, quarters, ... of the job: a few chords across the
// ring find a switch that cuts a group of nodes off without every node pinging every other.
std::vector<size_t> ring_offsets(size_t nodes) {
  std::vector<size_t> offsets{1};
  for (size_t part = nodes / 2; part > 1 && offsets.size() < kMaxPingsPerDevice; part /= 2) {
    if (std::find(offsets.begin(), offsets.end(), part) == offsets.end()) offsets.push_back(part);
  }
  return offsets;
}

const DeviceIp* device_of(const PingNode& node, int device) {
  for (const DeviceIp& d : node.devices) {
    if (d.device == device) return &d;
  }
  return nullptr;
}

struct Unreached {
  size_t from = 0, to = 0;
  const DevicePing* ping = nullptr;
  std::string detail;
};

// "node 3 (host-c) device 5 (10.0.3.5) cannot reach node 4 (host-d) device 5 (10.0.4.5): ..."
HealthFinding pair_finding(const std::vector<PingNode>& nodes, const Unreached& u, int device,
                           HealthStatus status) {
  const DeviceIp* source = device_of(nodes[u.from], u.ping->device);
  const std::string text =
      fmt::format("{} device {} ({}) cannot reach {} device {} ({}): {}", nodes[u.from].label,
                  u.ping->device, source != nullptr ? source->ip : "?", u.ping->peer,
                  u.ping->peer_device, u.ping->ip, u.detail);
  const std::string fix = fmt::format(
      "hccn_tool -i {} -ping -g address {} on {}; check both devices' links (hccn_tool -i N "
      "-link -g) and the switch ports between them",
      u.ping->device, u.ping->ip, nodes[u.from].label);
  return {"ping", device, status, text, fix};
}

}  // namespace

std::vector<std::vector<DevicePing>> plan_device_pings(const std::vector<PingNode>& nodes) {
  std::vector<std::vector<DevicePing>> plans(nodes.size());
  if (nodes.size() < 2) return plans;
  const std::vector<size_t> offsets = ring_offsets(nodes.size());
  for (size_t from = 0; from < nodes.size(); ++from) {
    for (size_t chord = 0; chord < offsets.size(); ++chord) {
      const PingNode& to = nodes[(from + offsets[chord]) % nodes.size()];
      const size_t shared = std::min(nodes[from].devices.size(), to.devices.size());
      for (size_t i = 0; i < shared; ++i) {
        // The ring from every device; each chord from one device, a different one per node
        // and chord, so that the chords cover every rail without a ping per device each.
        if (chord > 0 && i != (from + chord) % shared) continue;
        if (nodes[from].devices[i].ip.empty() || to.devices[i].ip.empty()) continue;
        plans[from].push_back(
            {nodes[from].devices[i].device, to.devices[i].ip, to.label, to.devices[i].device});
      }
    }
  }
  return plans;
}

std::vector<std::vector<HealthFinding>> judge_device_pings(
    const std::vector<PingNode>& nodes, const std::vector<std::vector<DevicePing>>& plans,
    const std::vector<std::vector<PingResult>>& results) {
  std::vector<std::vector<HealthFinding>> findings(nodes.size());
  std::vector<Unreached> unreached;
  std::vector<int> pairs_of(nodes.size(), 0);
  std::vector<int> reached(nodes.size(), 0);
  std::map<std::string, size_t> node_of_ip;
  for (size_t n = 0; n < nodes.size(); ++n) {
    for (const DeviceIp& d : nodes[n].devices) node_of_ip.emplace(d.ip, n);
  }
  for (size_t from = 0; from < nodes.size() && from < plans.size() && from < results.size();
       ++from) {
    for (const PingResult& r : results[from]) {
      const auto planned = std::find_if(plans[from].begin(), plans[from].end(), [&](const auto& p) {
        return p.device == r.device && p.ip == r.ip;
      });
      const auto to = node_of_ip.find(r.ip);
      if (planned == plans[from].end() || to == node_of_ip.end()) continue;  // not asked for
      if (r.answer == PingAnswer::kReached) {
        ++reached[from];
      } else if (r.answer == PingAnswer::kNotRun) {
        findings[from].push_back({"ping",
                                  r.device,
                                  HealthStatus::kNotRun,
                                  fmt::format("no answer pinging {} device {} ({}): {}",
                                              planned->peer, planned->peer_device, r.ip, r.detail),
                                  {}});
      } else {
        unreached.push_back({from, to->second, &*planned, r.detail});
        ++pairs_of[from];
        ++pairs_of[to->second];
      }
    }
  }
  for (const Unreached& u : unreached) {
    const bool from_blamed = pairs_of[u.from] >= pairs_of[u.to];
    const bool to_blamed = pairs_of[u.to] >= pairs_of[u.from];
    findings[u.from].push_back(pair_finding(
        nodes, u, u.ping->device, from_blamed ? HealthStatus::kFail : HealthStatus::kWarn));
    findings[u.to].push_back(pair_finding(nodes, u, u.ping->peer_device,
                                          to_blamed ? HealthStatus::kFail : HealthStatus::kWarn));
  }
  for (size_t n = 0; n < nodes.size(); ++n) {
    if (reached[n] > 0 && pairs_of[n] == 0) {
      findings[n].push_back({"ping",
                             -1,
                             HealthStatus::kPass,
                             fmt::format("{} device-plane pings reached", reached[n]),
                             {}});
    }
  }
  return findings;
}

}  // namespace npu_run
