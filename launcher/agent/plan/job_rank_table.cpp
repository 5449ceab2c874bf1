#include "agent/plan/job_rank_table.hpp"

#include <fmt/format.h>

#include <algorithm>

namespace npu_run {

namespace {

// Version 1.2 where every node is on a SuperPoD and knows each device's SDID (Atlas A3).
bool on_superpods(const std::vector<rdzv::PeerInfo>& peers) {
  return !peers.empty() && std::all_of(peers.begin(), peers.end(), [](const rdzv::PeerInfo& p) {
    return !p.node.topology.superpod.empty() &&
           p.node.topology.super_device_ids.size() == p.node.devices.size();
  });
}

}  // namespace

RankTable rank_table_from_peers(const std::vector<rdzv::PeerInfo>& peers) {
  const bool superpods = on_superpods(peers);
  std::vector<ServerDevices> servers;
  for (const rdzv::PeerInfo& peer : peers) {
    ServerDevices s{peer.node.addr, peer.node.devices, {}, {}};
    for (size_t i = 0; i < peer.node.devices.size() && i < peer.node.device_ips.size(); ++i) {
      s.device_ips[peer.node.devices[i]] = peer.node.device_ips[i];
    }
    if (superpods) {
      s.super_pod_id = peer.node.topology.superpod;
      for (size_t i = 0; i < peer.node.devices.size(); ++i)
        s.super_device_ids[peer.node.devices[i]] = peer.node.topology.super_device_ids[i];
    }
    servers.push_back(std::move(s));
  }
  return build_rank_table(servers, superpods ? "1.2" : "1.0");
}

std::string rank_table_mismatch(const RankTable& table, const std::string& path,
                                const Assignment& a, const std::vector<int>& devices,
                                const std::vector<std::string>& identities) {
  if (table.device_count() != static_cast<size_t>(a.world_size)) {
    return fmt::format("rank table {} lists {} devices but the job has {} workers", path,
                       table.device_count(), a.world_size);
  }
  const RankTableServer* server = nullptr;
  for (const RankTableServer& s : table.servers) {
    if (std::find(identities.begin(), identities.end(), s.server_id) != identities.end())
      server = &s;
  }
  if (server == nullptr) {
    if (a.node_rank >= static_cast<int>(table.servers.size())) {
      return fmt::format(
          "rank table {} has no server for node {} ({}): none of its server_ids is this host, and "
          "it "
          "lists only {} servers",
          path, a.node_rank, a.host, table.servers.size());
    }
    server = &table.servers[a.node_rank];  // servers listed in node-rank order
  }
  for (size_t local = 0; local < devices.size(); ++local) {
    const int rank = a.rank_offset + static_cast<int>(local);
    const auto d =
        std::find_if(server->devices.begin(), server->devices.end(),
                     [&](const RankTableDevice& x) { return x.device_id == devices[local]; });
    if (d == server->devices.end()) {
      return fmt::format(
          "rank table {}: server '{}' has no device {}, which local rank {} uses; regenerate the "
          "table "
          "(npu_run rank-table) or use --rank-table auto",
          path, server->server_id, devices[local], local);
    }
    if (d->rank_id != rank) {
      return fmt::format(
          "rank table {}: server '{}' gives device {} rank_id {}, but this job runs rank {} on it "
          "(node {}, local rank {}); the table must match the job's ranks, or use --rank-table "
          "auto",
          path, server->server_id, devices[local], d->rank_id, rank, a.node_rank, local);
    }
  }
  return "";
}

}  // namespace npu_run
