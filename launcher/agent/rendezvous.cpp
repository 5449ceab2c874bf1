#include "agent/rendezvous.hpp"

namespace npu_run {

void deliver_to_agent(const Rendezvous::Handlers& handlers, const rdzv::ServerMessage& message,
                      const std::string& host) {
  std::visit(
      [&](const auto& m) {
        using T = std::decay_t<decltype(m)>;
        if constexpr (std::is_same_v<T, rdzv::Assigned>) {
          handlers.assigned(to_assignment(m, host));
        } else if constexpr (std::is_same_v<T, rdzv::StopWorkers>) {
          handlers.stop_workers(m.root_cause);
        } else if constexpr (std::is_same_v<T, rdzv::Reform>) {
          handlers.reform(m);
        } else if constexpr (std::is_same_v<T, rdzv::Decision>) {
          handlers.decided(m);
        } else if constexpr (std::is_same_v<T, rdzv::Progress>) {
          handlers.progress(m);
        } else if constexpr (std::is_same_v<T, rdzv::PingRequest>) {
          if (handlers.pings) handlers.pings(m);
        } else if constexpr (std::is_same_v<T, rdzv::ProbeRequest>) {
          if (handlers.probe) handlers.probe(m);
        } else if constexpr (std::is_same_v<T, rdzv::PingVerdict>) {
          if (handlers.ping_verdict) handlers.ping_verdict(m);
        } else if constexpr (std::is_same_v<T, rdzv::Standby>) {
          if (handlers.standby) handlers.standby(m);
        } else if constexpr (std::is_same_v<T, rdzv::Dismissed>) {
          if (handlers.dismissed) handlers.dismissed(m);
        } else if constexpr (std::is_same_v<T, rdzv::CollectRecords>) {
          if (handlers.collect_records) handlers.collect_records(m);
        } else if constexpr (std::is_same_v<T, rdzv::ErrorReply>) {
          if (m.code == "health_gate" && handlers.health_failed) {
            handlers.health_failed(m.message);
          } else {
            handlers.failed(m.message);
          }
        }
      },
      message);
}

}  // namespace npu_run
