// A TCP port reserved for the workers' MASTER_PORT. It stays bound (SO_REUSEADDR, never
// listening) for the agent's lifetime: other programs cannot bind it, the kernel does not hand
// it out for outgoing connections, yet torch's TCPStore (which also sets SO_REUSEADDR) can bind
// and listen on it. This replaces torchrun's "bind port 0, close it, hope".
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace boost::asio {
class io_context;
}

namespace npu_run {

struct PortRange {
  int first = 0;
  int last = 0;  // inclusive
  bool contains(int port) const { return port >= first && port <= last; }
};

class HeldPort {
 public:
  // Binds an ephemeral port on the wildcard address (dual-stack IPv6 when available), retrying
  // while the kernel offers ports inside `avoid`. Throws std::runtime_error naming the cause.
  HeldPort(boost::asio::io_context& io, const std::vector<PortRange>& avoid);
  ~HeldPort();
  HeldPort(HeldPort&&) noexcept;
  HeldPort& operator=(HeldPort&&) noexcept;

  int port() const;

  struct Socket;  // the bound acceptor; defined in held_port.cpp to keep Asio out of this header

 private:
  std::unique_ptr<Socket> socket_;
};

// The ports a worker MASTER_PORT must not use on this host: HCCL's host ports
// (HCCL_IF_BASE_PORT, default 60000, and the 32 after it) and the rendezvous port.
std::vector<PortRange> ports_to_avoid(const std::string& hccl_if_base_port, int rendezvous_port);

// Throws UsageError unless `addr` (name or IP) resolves to an address of this host.
void require_local_address(const std::string& addr, const std::string& source);

}  // namespace npu_run
