// A TCP port reserved for the workers' MASTER_PORT. It stays bound (SO_REUSEADDR, never
// listening) for the agent's lifetime: other programs cannot bind it, the kernel does not hand
// it out for outgoing connections, yet torch's TCPStore (which also sets SO_REUSEADDR) can bind
// and listen on it. This replaces torchrun's "bind port 0, close it, hope".
#pragma once

#include <boost/asio/ip/tcp.hpp>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "basics/port_range.hpp"

namespace boost::asio {
class io_context;
}

namespace npu_run::net {

class HeldPort {
 public:
  // Binds an ephemeral port on the wildcard address (dual-stack IPv6 when available), retrying
  // while the kernel offers ports inside `avoid`. Throws std::runtime_error naming the cause.
  HeldPort(boost::asio::io_context& io, const std::vector<PortRange>& avoid);
  ~HeldPort();
  HeldPort(HeldPort&&) noexcept;
  HeldPort& operator=(HeldPort&&) noexcept;

  int port() const;
  // The bound socket, to listen on: the agent serves the workers' store on it.
  boost::asio::ip::tcp::acceptor& acceptor();

  struct Socket;  // the bound acceptor; defined in held_port.cpp to keep Asio out of this header

 private:
  std::unique_ptr<Socket> socket_;
};

// Throws UsageError unless `addr` (name or IP) resolves to an address of this host.
void require_local_address(const std::string& addr, const std::string& source);

}  // namespace npu_run::net
