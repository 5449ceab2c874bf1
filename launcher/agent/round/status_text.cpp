#include "agent/round/status_text.hpp"

#include <fmt/format.h>

#include "rendezvous/protocol/describe.hpp"
#include "rendezvous/protocol/status_wire.hpp"

namespace npu_run {
namespace {

std::string seconds(int64_t ms) {
  return fmt::format("{:.1f} s", static_cast<double>(ms) / 1000.0);
}

// A node whose agent was not heard from for this long is flagged: heartbeats come every 5 s.
constexpr int64_t kSilentMs = 10'000;

std::string node_line(const rdzv::NodeStatus& n) {
  std::string line = n.node_rank >= 0 ? fmt::format("  node {}  {}", n.node_rank, n.host)
                                      : fmt::format("  {}", n.host);
  if (!n.addr.empty()) line += "  " + n.addr;
  if (n.state == "waiting" || n.state == "checking" || n.state == "excluded") {
    const char* why = n.state == "waiting"    ? "waiting for the next round"
                      : n.state == "checking" ? "running its health checks"
                                              : "excluded: it failed its health gate, rechecking";
    line += fmt::format("  {} worker{}, {}", n.nproc, n.nproc == 1 ? "" : "s", why);
  } else {
    line += n.nproc == 1 ? fmt::format("  rank {}", n.rank_offset)
                         : fmt::format("  ranks {}-{}", n.rank_offset, n.rank_offset + n.nproc - 1);
    line += "  " + n.state;
  }
  if (n.state != "lost" && n.state != "left" && n.silent_ms >= kSilentMs)
    line += fmt::format("  (not heard from for {})", seconds(n.silent_ms));
  return line + "\n";
}

// The node's health verdict: one summary line, then each finding that did not pass.
std::string health_lines(const NodeVerdict& v) {
  const size_t passed = v.with_status(HealthStatus::kPass).size() + v.omitted_passes;
  std::string out = fmt::format("    health: {} of {} checks passed in {}{}\n", passed,
                                v.findings.size() + v.omitted_passes, seconds(v.elapsed_ms),
                                v.failed() ? "; failed" : "");
  for (const HealthFinding& f : v.findings) {
    if (f.status == HealthStatus::kPass) continue;
    out += fmt::format("      {} {}: {}\n", to_string(f.status), finding_subject(f), f.detail);
  }
  return out;
}

// "; snapshot: step 50 in memory, 50 copied to the next node, 45 on storage, 1 to write"
std::string snapshot_text(const rdzv::RankSnapshot& s) {
  std::vector<std::string> parts;
  if (s.memory >= 0) parts.push_back(fmt::format("step {} in memory", s.memory));
  if (s.copied >= 0) parts.push_back(fmt::format("{} copied to the next node", s.copied));
  if (s.stored >= 0) parts.push_back(fmt::format("{} on storage", s.stored));
  if (s.to_write > 0) parts.push_back(fmt::format("{} to write", s.to_write));
  return fmt::format("; snapshot: {}", fmt::join(parts, ", "));
}

std::string rank_line(const rdzv::NodeStatus& n, const rdzv::RankBeat& b) {
  std::string line =
      fmt::format("    rank {}  local {}  ", n.rank_offset + b.local_rank, b.local_rank);
  if (b.beats == 0)
    line += "no beat yet";
  else
    line += fmt::format("{} beat{}, last '{}' {} ago", b.beats, b.beats == 1 ? "" : "s", b.text,
                        seconds(b.age_ms));
  if (b.snapshot) line += snapshot_text(*b.snapshot);
  return line + "\n";
}

}  // namespace

std::string format_job_status(const rdzv::JobStatus& s) {
  size_t members = 0;
  for (const auto& n : s.nodes)
    members += n.state != "waiting" && n.state != "checking" && n.state != "excluded" ? 1 : 0;
  std::string out = fmt::format(
      "job '{}': {}, round {}, restart {} of {}, {} node{}{}\n", s.run_id, s.phase, s.round,
      s.restart_count, s.max_restarts, members, members == 1 ? "" : "s",
      s.min_nodes == s.max_nodes ? fmt::format(" of {}", s.max_nodes)
                                 : fmt::format(" ({}..{} wanted)", s.min_nodes, s.max_nodes));
  for (const auto& n : s.nodes) {
    out += node_line(n);
    if (!n.place.empty()) out += "    place: " + n.place + "\n";
    if (n.health) out += health_lines(*n.health);
    if (n.state == "waiting" || n.state == "checking" || n.state == "excluded") continue;
    if (n.ranks.empty() && n.state == "running") out += "    (no beats heard from its ranks yet)\n";
    for (const auto& b : n.ranks) out += rank_line(n, b);
  }
  if (s.missing_nodes > 0) {
    out += fmt::format("missing: {} more node{}", s.missing_nodes, s.missing_nodes == 1 ? "" : "s");
    if (!s.missing_node_ranks.empty())
      out += fmt::format(" (node ranks {})", fmt::join(s.missing_node_ranks, ", "));
    out += "\n";
  }
  if (s.root_cause) out += "root cause: " + rdzv::describe(*s.root_cause) + "\n";
  if (!s.blame.empty()) out += s.blame + "\n";
  if (s.straggler) out += "straggler: " + s.straggler->text + "\n";
  return out;
}

std::string job_status_json(const rdzv::JobStatus& status) {
  rdzv::json j = rdzv::status_json(status);
  j.erase("type");
  j.erase("ok");
  j.erase("query_id");
  return rdzv::dump(j) + "\n";
}

}  // namespace npu_run
