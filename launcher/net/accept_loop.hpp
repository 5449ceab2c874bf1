// Takes the connections a listening socket queues, for as long as it listens: each one
// close-on-exec (accept4, which Asio's accept cannot ask for), up to 64 per turn of the event
// loop so that a burst of thousands cannot hold the loop, and, out of descriptors (EMFILE,
// ENFILE) or on another error, a pause of 100 ms instead of a spin, said once per 10 s with the
// fix. The rendezvous server and the workers' stores accept through it (TCP), and the agent's
// status socket (a Unix stream socket, net/answer_socket.hpp).
#pragma once

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/steady_timer.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <string>

namespace npu_run::net {

template <typename Protocol>
class BasicAcceptLoop : public std::enable_shared_from_this<BasicAcceptLoop<Protocol>> {
 public:
  using Acceptor = typename Protocol::acceptor;
  using Handler = std::function<void(typename Protocol::socket)>;

  // Starts accepting on `acceptor` (listening already; made non-blocking here) and hands each
  // connection to `handler`. `what` names the listener in warnings ("rendezvous server").
  // The acceptor must outlive the loop or be preceded by stop().
  static std::shared_ptr<BasicAcceptLoop> start(Acceptor& acceptor, std::string what,
                                                Handler handler);

  // No more accepts and no more calls of the handler, at once; the acceptor stays open.
  void stop();

  // Times accept() failed with an error other than an empty queue or an aborted handshake.
  size_t failures() const { return failures_; }

  BasicAcceptLoop(Acceptor& acceptor, std::string what, Handler handler);

 private:
  void wait();
  void take_queued();
  void failed(const boost::system::error_code& ec);

  Acceptor& acceptor_;
  std::string what_;
  Handler handler_;
  boost::asio::steady_timer retry_;
  bool stopped_ = false;
  size_t failures_ = 0;
  std::chrono::steady_clock::time_point last_warning_{};
};

// Defined in accept_loop.cpp for these two.
extern template class BasicAcceptLoop<boost::asio::ip::tcp>;
extern template class BasicAcceptLoop<boost::asio::local::stream_protocol>;
using AcceptLoop = BasicAcceptLoop<boost::asio::ip::tcp>;
using LocalAcceptLoop = BasicAcceptLoop<boost::asio::local::stream_protocol>;

}  // namespace npu_run::net
