#include "agent/rooms/metrics_room.hpp"

#include "agent/link/metrics_text.hpp"
#include "agent/records/metrics_server.hpp"

namespace npu_run {

MetricsRoom::MetricsRoom(const RoomContext& ctx) : ctx_(ctx) {
  const RecordsConfig& records = ctx.cfg.records;
  if (records.metrics_port == 0) return;
  server_ = std::make_unique<MetricsServer>(ctx.io, records.metrics_addr, records.metrics_port,
                                            [this] { return text(); });
}

MetricsRoom::~MetricsRoom() = default;

void MetricsRoom::joining() {
  metrics_.join_sent(AgentMetrics::Clock::now());
}

void MetricsRoom::assigned(const Assignment& /*assignment*/) {
  metrics_.seated(AgentMetrics::Clock::now());
}

void MetricsRoom::started(Attempt& /*attempt*/) {
  metrics_.workers_spawned(AgentMetrics::Clock::now());
}

void MetricsRoom::done(GroupEnd& /*end*/, Attempt& /*attempt*/) {
  metrics_.workers_done(AgentMetrics::Clock::now());
}

void MetricsRoom::decided(const rdzv::Decision& decision) {
  metrics_.decided(decision);
}

std::string MetricsRoom::text() const {
  MetricsText out;
  const AgentState state = ctx_.host.state();
  const Attempt* attempt = ctx_.host.attempt();
  const bool seated =
      attempt != nullptr && (state == AgentState::kRunning || state == AgentState::kReporting);
  const RoundWorkers* group =
      state == AgentState::kRunning && attempt != nullptr ? attempt->group.get() : nullptr;
  const NodeView view{ctx_.agent.host, std::string(state_name(state)),
                      seated ? attempt->assignment.rank_offset : 0,
                      group != nullptr ? group->running_pids().size() : 0, ctx_.beats};
  write_agent_metrics(out, metrics_, view, AgentMetrics::Clock::now());
  ctx_.rendezvous.add_metrics(out);
  for (const auto& source : ctx_.agent.metrics_sources) source(out);
  return out.text();
}

}  // namespace npu_run
