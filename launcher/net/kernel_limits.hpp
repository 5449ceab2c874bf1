// The kernel settings that cap how many agents can connect to the rendezvous at once, read in
// one place for the server's start-up warning and for `npu_run doctor`.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace npu_run::net {

struct KernelQueue {
  std::string key;            // sysctl name, e.g. net.core.somaxconn
  std::optional<long> value;  // unset when it cannot be read
};

// net.core.somaxconn and net.ipv4.tcp_max_syn_backlog under `proc_root`.
std::vector<KernelQueue> kernel_queues(const std::string& proc_root = "/proc");

// The value to set for `nodes` agents: the usual maximum, or more for larger jobs.
long recommended_queue(long nodes);

// "sysctl -w net.core.somaxconn=65535 net.ipv4.tcp_max_syn_backlog=65535" for the queues given.
std::string sysctl_fix(const std::vector<KernelQueue>& queues, long nodes);

}  // namespace npu_run::net
