#include "agent/agent_log.hpp"

#include <fmt/format.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

namespace npu_run {

void configure_agent_logging(const std::string& level, const std::string& host,
                             std::optional<int> node_rank) {
  // Single-threaded sink: the agent is one event loop.
  auto logger = spdlog::stderr_color_st("npu_run");
  logger->set_level(spdlog::level::from_str(level));
  spdlog::set_default_logger(logger);
  set_agent_log_identity(node_rank.value_or(-1), host);
}

void set_agent_log_identity(int node_rank, const std::string& host) {
  const std::string node = node_rank < 0 ? "?" : std::to_string(node_rank);
  // The identity is baked into the pattern; fmt braces must not reach spdlog's formatter.
  spdlog::set_pattern(
      fmt::format("%Y-%m-%d %H:%M:%S.%e [npu_run node {} {}] %^%l%$: %v", node, host));
}

}  // namespace npu_run
