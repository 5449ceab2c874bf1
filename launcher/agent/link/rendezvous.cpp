#include "agent/link/rendezvous.hpp"

namespace npu_run {

void deliver_to_agent(const Rendezvous::Handlers& handlers, const rdzv::ServerMessage& message,
                      const std::string& host) {
  std::visit(
      [&](const auto& m) {
        using T = std::decay_t<decltype(m)>;
        if constexpr (std::is_same_v<T, rdzv::Assigned>) {
          handlers.assigned(to_assignment(m, host));
        } else if constexpr (std::is_same_v<T, rdzv::ErrorReply>) {
          if (m.code == "health_gate" && handlers.health_failed) {
            handlers.health_failed(m.message);
          } else {
            handlers.failed(m.message);
          }
        } else if constexpr (!std::is_same_v<T, rdzv::Welcome> &&
                             !std::is_same_v<T, rdzv::HeartbeatAck> &&
                             !std::is_same_v<T, rdzv::Challenge> &&
                             !std::is_same_v<T, rdzv::Resumed> &&
                             !std::is_same_v<T, rdzv::JobStatus>) {
          if (handlers.message) handlers.message(message);
        }
      },
      message);
}

}  // namespace npu_run
