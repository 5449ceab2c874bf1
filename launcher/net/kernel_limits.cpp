#include "net/kernel_limits.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <fstream>

namespace npu_run::net {

std::vector<KernelQueue> kernel_queues(const std::string& proc_root) {
  std::vector<KernelQueue> queues;
  for (const auto& [key, file] :
       {std::pair{"net.core.somaxconn", "/sys/net/core/somaxconn"},
        std::pair{"net.ipv4.tcp_max_syn_backlog", "/sys/net/ipv4/tcp_max_syn_backlog"}}) {
    std::ifstream in(proc_root + file);
    long value = -1;
    in >> value;
    queues.push_back(
        KernelQueue{key, in && value >= 0 ? std::optional<long>(value) : std::nullopt});
  }
  return queues;
}

long recommended_queue(long nodes) {
  return std::max<long>(65535, nodes);
}

std::string sysctl_fix(const std::vector<KernelQueue>& queues, long nodes) {
  std::string fix = "sysctl -w";
  for (const KernelQueue& q : queues) fix += fmt::format(" {}={}", q.key, recommended_queue(nodes));
  return fix;
}

}  // namespace npu_run::net
