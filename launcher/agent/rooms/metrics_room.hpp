// The metrics room (--metrics-port): this node's rounds, restarts and the seconds each phase of
// its last round took (agent/records/agent_metrics.hpp), kept as the agent's transitions come, and
// served with the rendezvous' and the store's on the agent's loop
// (agent/records/metrics_server.hpp).
#pragma once

#include <memory>

#include "agent/records/agent_metrics.hpp"
#include "agent/rooms/room_context.hpp"

namespace npu_run {

class MetricsServer;

class MetricsRoom final : public AgentRoom {
 public:
  // Listens on --metrics-addr:--metrics-port when one is set (a UsageError when it cannot).
  explicit MetricsRoom(const RoomContext& ctx);
  ~MetricsRoom() override;
  MetricsRoom(const MetricsRoom&) = delete;
  MetricsRoom& operator=(const MetricsRoom&) = delete;

  // The health gate's verdict took this long (agent/rooms/health_room.hpp tells).
  void gate_took(int64_t ms) { metrics_.gate_took(ms); }

  void joining() override;
  void assigned(const Assignment& assignment) override;
  void started(Attempt& attempt) override;
  void done(GroupEnd& end, Attempt& attempt) override;
  void decided(const rdzv::Decision& decision) override;

  // This node's metrics, the rendezvous' and the store's, as of now.
  std::string text() const;

 private:
  RoomContext ctx_;
  AgentMetrics metrics_;
  std::unique_ptr<MetricsServer> server_;
};

}  // namespace npu_run
