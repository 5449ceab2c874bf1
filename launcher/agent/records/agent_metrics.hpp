// What an agent's `--metrics-port` says of its own node: its rounds and restarts (by class), the
// seconds each phase of its last round took, its ranks' beats and its workers. The rendezvous
// and the store add theirs (Rendezvous::add_metrics, AgentContext::metrics_sources).
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <string>

#include "agent/link/metrics_text.hpp"
#include "rendezvous/protocol/messages.hpp"

namespace npu_run {

class ProgressBeats;

// Kept by the agent as its rounds go (on the loop; read when a scrape comes).
struct AgentMetrics {
  using Clock = std::chrono::steady_clock;

  uint64_t rounds = 0;                       // rounds this node was assigned a seat in
  std::map<std::string, uint64_t> restarts;  // by class: infrastructure, deterministic, ...
  // The last round's phases: "rendezvous" (join to seat), "health_gate", "start" (seat to
  // workers spawned), "first_beat" (spawned to every local rank's first beat), "run".
  std::map<std::string, double> phase_seconds;
  Clock::time_point joined{};
  Clock::time_point assigned{};
  Clock::time_point spawned{};

  void join_sent(Clock::time_point at) { joined = at; }
  void seated(Clock::time_point at);
  void workers_spawned(Clock::time_point at);
  void gate_took(int64_t ms) { phase_seconds["health_gate"] = static_cast<double>(ms) / 1000.0; }
  void workers_done(Clock::time_point at);
  void decided(const rdzv::Decision& decision);
};

// The node's own view as of `now`: `state` (the agent's state name), `rank_offset` and the
// workers alive. `beats` may be null (no NPU_RUN_PROGRESS).
struct NodeView {
  std::string host;
  std::string state;
  int rank_offset = 0;
  size_t workers_alive = 0;
  const ProgressBeats* beats = nullptr;
};

// A rank counts as beating when its last beat is at most this old.
inline constexpr std::chrono::seconds kBeatingWithin{60};

void write_agent_metrics(MetricsText& out, const AgentMetrics& metrics, const NodeView& node,
                         AgentMetrics::Clock::time_point now);

}  // namespace npu_run
