#include "rendezvous/server/server_log.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "net/kernel_limits.hpp"
#include "rendezvous/protocol/describe.hpp"

namespace npu_run::rdzv {

void log_milestone(const ServerMessage& message, int max_restarts) {
  std::visit(
      [&](const auto& m) {
        using T = std::decay_t<decltype(m)>;
        if constexpr (std::is_same_v<T, Assigned>) {
          if (m.node_rank == 0) {
            spdlog::info("round {}: all {} nodes joined; workers' store at {}:{}", m.round,
                         m.nnodes, m.master_addr, m.master_port);
          }
        } else if constexpr (std::is_same_v<T, StopWorkers>) {
          spdlog::warn("round {}: {}; stopping the other nodes", m.round, describe(m.root_cause));
        } else if constexpr (std::is_same_v<T, Reform>) {
          spdlog::info("round {}: {}; stopping every node", m.round, describe(m));
        } else if constexpr (std::is_same_v<T, Decision>) {
          if (m.action == Action::kRestart && m.membership_change) {
            spdlog::info("round {} stopped; the job re-forms in round {}", m.round, m.round + 1);
          } else if (m.action == Action::kRestart && m.restarts_charged < m.restart_count &&
                     m.failure_class == FailureClass::kInfrastructure) {
            spdlog::warn(
                "round {} failed ({}); attempt {}, not counted against --max-restarts "
                "({} of {} used)",
                m.round, m.class_reason, m.restart_count, m.restarts_charged, max_restarts);
          } else if (m.action == Action::kRestart) {
            spdlog::warn("round {} failed ({}); restart {} of {}", m.round, m.class_reason,
                         m.restarts_charged, max_restarts);
          } else if (m.failure_class == FailureClass::kDeterministic) {
            spdlog::info("job ended with exit code {}: {}", m.exit_code, m.class_reason);
          } else {
            spdlog::info("job ended with exit code {}", m.exit_code);
          }
        }
      },
      message);
}

std::string kernel_limit_warning(int nodes) {
  const auto queues = net::kernel_queues();
  std::vector<net::KernelQueue> small;
  std::vector<std::string> values;
  for (const net::KernelQueue& q : queues) {
    values.push_back(
        fmt::format("{} is {}", q.key, q.value ? std::to_string(*q.value) : "unknown"));
    if (q.value && *q.value < nodes) small.push_back(q);
  }
  if (small.empty()) return "";
  return fmt::format(
      "{}: fewer than the {} agents that connect at once, so their connections will be retried and "
      "the "
      "rendezvous slows down. To fix, run as root: {}",
      fmt::join(values, " and "), nodes, net::sysctl_fix(small, nodes));
}

}  // namespace npu_run::rdzv
