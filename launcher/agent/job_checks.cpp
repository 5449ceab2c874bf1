#include "agent/job_checks.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <fstream>

#include "agent/job_rank_table.hpp"
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

std::string write_auto_table(Assignment& a, const std::string& run_dir) {
  const RankTable table = rank_table_from_peers(a.peers);
  a.rank_table_file = run_dir + "/rank_table.json";
  std::ofstream out(a.rank_table_file, std::ios::trunc);
  if (!(out << rank_table_json(table)) || !out.flush())
    return fmt::format("cannot write the rank table {}", a.rank_table_file);
  spdlog::info("rank table for {} servers and {} devices written to {}", table.servers.size(),
               table.device_count(), a.rank_table_file);
  return "";
}

// This server's entry is found by any of its names: host name, primary address, --local-addr,
// or the address the rendezvous saw.
std::string match_given_table(const LaunchConfig& cfg, const GivenRankTable& given, Assignment& a) {
  std::vector<std::string> identities = {a.host, primary_address()};
  if (cfg.rendezvous.local_addr) identities.push_back(*cfg.rendezvous.local_addr);
  for (const auto& p : a.peers) {
    if (p.node_rank == a.node_rank) identities.push_back(p.node.addr);
  }
  const std::string mismatch =
      rank_table_mismatch(given.table, given.path, a, cfg.shape.devices, identities);
  if (mismatch.empty()) a.rank_table_file = given.path;
  return mismatch;
}

}  // namespace

std::string prepare_job(const LaunchConfig& cfg, Assignment& a, const std::string& run_dir) {
  if (std::string error = check_topology(cfg, a); !error.empty()) return error;
  try {
    if (cfg.ascend.rank_table_auto()) return write_auto_table(a, run_dir);
    if (const GivenRankTable* given = cfg.ascend.given_rank_table())
      return match_given_table(cfg, *given, a);
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}

}  // namespace npu_run
