#include "agent/plan/job_checks.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <fstream>

#include "agent/plan/job_rank_table.hpp"
#include "ascend/topology.hpp"
#include "basics/usage_error.hpp"
#include "net/host_address.hpp"

namespace npu_run {

namespace {

std::string check_topology(const LaunchConfig& cfg, const Assignment& a) {
  if (!cfg.wants_peers() || a.peers.size() != static_cast<size_t>(a.nnodes)) return "";
  std::vector<int> per_node;
  for (const auto& p : a.peers) per_node.push_back(p.node.nproc);
  const JobTopology topology = check_job_devices(cfg.ascend.soc, per_node);
  for (const auto& warning : topology.warnings) spdlog::warn("{}", warning);
  return topology.error;
}

// This server's entry is found by any of its names: host name, primary address, --local-addr,
// or the address the rendezvous saw.
std::string given_table_mismatch(const LaunchConfig& cfg, const GivenRankTable& given,
                                 const Assignment& a) {
  std::vector<std::string> identities = {a.host, net::primary_address()};
  if (cfg.rendezvous.local_addr) identities.push_back(*cfg.rendezvous.local_addr);
  for (const auto& p : a.peers) {
    if (p.node_rank == a.node_rank) identities.push_back(p.node.addr);
  }
  return rank_table_mismatch(given.table, given.path, a, cfg.shape.devices, identities);
}

}  // namespace

std::optional<std::string> job_refusal(const LaunchConfig& cfg, const Assignment& a) {
  if (std::string error = check_topology(cfg, a); !error.empty()) return error;
  try {
    if (const GivenRankTable* given = cfg.ascend.given_rank_table()) {
      if (std::string mismatch = given_table_mismatch(cfg, *given, a); !mismatch.empty())
        return mismatch;
    }
  } catch (const UsageError& e) {
    return e.what();
  }
  return std::nullopt;
}

std::string rank_table_file(const LaunchConfig& cfg, const Assignment& a,
                            const std::string& run_dir) {
  if (const GivenRankTable* given = cfg.ascend.given_rank_table()) return given->path;
  if (!cfg.ascend.rank_table_auto()) return "";
  const RankTable table = rank_table_from_peers(a.peers);
  const std::string path = run_dir + "/rank_table.json";
  std::ofstream out(path, std::ios::trunc);
  if (!(out << rank_table_json(table)) || !out.flush())
    throw UsageError(fmt::format("cannot write the rank table {}", path));
  spdlog::info("rank table for {} servers and {} devices written to {}", table.servers.size(),
               table.device_count(), path);
  return path;
}

std::optional<std::string> prepare_round(const LaunchConfig& cfg, Assignment& a,
                                         const std::string& run_dir) {
  if (std::optional<std::string> refusal = job_refusal(cfg, a)) return refusal;
  try {
    a.rank_table_file = rank_table_file(cfg, a, run_dir);
  } catch (const UsageError& e) {
    return e.what();
  }
  return std::nullopt;
}

}  // namespace npu_run
