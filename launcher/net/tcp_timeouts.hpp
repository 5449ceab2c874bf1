// How long TCP itself waits on a silent link, bounded so that a short partition is ridden out
// and a long one ends cleanly.
//
// A segment lost during a partition is retransmitted with exponential backoff (0.2, 0.6, 1.4,
// 3.0, 6.2, 12.6, 25.4 s after the loss), so after a 20 s cut the link stays silent until the
// 25.4 s retransmission: long enough for the heartbeat timeout (30 s) to declare a node lost
// that was back after 20. TCP_RTO_MAX_MS (Linux 6.15) caps the backoff at 1 s, so a healed
// link speaks again within a second. TCP_USER_TIMEOUT (Linux 2.6.37) ends a connection whose
// data stayed unacknowledged longer than the job would wait anyway, instead of retrying for the
// default 15 minutes.
#pragma once

#include <chrono>

namespace npu_run::net {

struct TcpTimeouts {
  bool rto_max_set = false;  // false: the kernel has no TCP_RTO_MAX_MS (before 6.15)
  bool user_timeout_set = false;
};

// Best effort on socket `fd`; what took effect is returned (the agent logs it once).
TcpTimeouts bound_tcp_timeouts(int fd, std::chrono::milliseconds give_up_after);

}  // namespace npu_run::net
