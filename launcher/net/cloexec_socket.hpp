// Asio opens sockets and accepts connections without SOCK_CLOEXEC. Every socket npu_run opens
// goes through here, so that a worker (or its daemonized grandchild) never inherits the
// rendezvous listener, a rendezvous connection or the held worker port. Marking right after
// open is race-free for npu_run, whose only forking thread is the one that opens sockets; the
// workers' pre-exec setup closes whatever might still slip through (basics/descriptors.hpp).
#pragma once

#include <sys/socket.h>

#include <boost/asio/ip/tcp.hpp>

#include "basics/descriptors.hpp"

namespace npu_run::net {

template <typename Socket, typename Protocol>
void open_cloexec(Socket& socket, const Protocol& protocol, boost::system::error_code& ec) {
  socket.open(protocol, ec);
  if (!ec) set_cloexec(socket.native_handle());
}

// accept4 with SOCK_CLOEXEC on a non-blocking listener: the connection as an Asio socket, or
// an error (would_block when none is waiting).
template <typename Acceptor>
typename Acceptor::protocol_type::socket accept_cloexec(Acceptor& acceptor,
                                                        boost::system::error_code& ec) {
  typename Acceptor::protocol_type::socket socket(acceptor.get_executor());
  const int fd =
      ::accept4(acceptor.native_handle(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
  if (fd < 0) {
    ec.assign(errno, boost::system::system_category());
    return socket;
  }
  socket.assign(acceptor.local_endpoint(ec).protocol(), fd, ec);
  if (ec) ::close(fd);
  return socket;
}

}  // namespace npu_run::net
