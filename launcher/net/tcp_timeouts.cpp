#include "net/tcp_timeouts.hpp"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

namespace npu_run::net {

namespace {
// Not in the headers of older C libraries; the value is the kernel's ABI.
#ifndef TCP_RTO_MAX_MS
constexpr int kTcpRtoMaxMs = 44;
#else
constexpr int kTcpRtoMaxMs = TCP_RTO_MAX_MS;
#endif
// The least the kernel accepts: a healed link is heard from within a second.
constexpr int kRtoMaxMs = 1000;
}  // namespace

TcpTimeouts bound_tcp_timeouts(int fd, std::chrono::milliseconds give_up_after) {
  TcpTimeouts result;
  result.rto_max_set =
      ::setsockopt(fd, IPPROTO_TCP, kTcpRtoMaxMs, &kRtoMaxMs, sizeof kRtoMaxMs) == 0;
  const auto user_timeout = static_cast<unsigned int>(give_up_after.count());
  result.user_timeout_set =
      ::setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &user_timeout, sizeof user_timeout) == 0;
  return result;
}

}  // namespace npu_run::net
