// The rendezvous server's listening sockets. The main address decides the port; more addresses
// of this host (a master name that resolves to several) are served on the same port when they
// can be, and skipped with a word if not. The backlog is the kernel's net.core.somaxconn (the
// most it grants) unless ServerOptions::backlog says otherwise.
#pragma once

#include <boost/asio/ip/tcp.hpp>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "net/accept_loop.hpp"
#include "rendezvous/server/server_options.hpp"

namespace npu_run::rdzv {

class Listeners {
 public:
  explicit Listeners(boost::asio::io_context& io) : io_(io) {}

  // Binds and listens on every address of `options`; throws BindError for the main one.
  void bind(const ServerOptions& options);
  int port() const;
  int backlog() const { return backlog_; }
  // "ADDRESS:PORT" of each address served, IPv6 ones bracketed.
  std::vector<std::string> endpoints() const;
  // Accepts on every address until stop(); each connection goes to `accepted`.
  void start(const std::function<void(boost::asio::ip::tcp::socket)>& accepted);
  void stop();

 private:
  std::unique_ptr<boost::asio::ip::tcp::acceptor> listen_on(const std::string& address, int port);

  boost::asio::io_context& io_;
  int backlog_ = 0;
  std::vector<std::unique_ptr<boost::asio::ip::tcp::acceptor>> acceptors_;
  std::vector<std::string> served_;
  std::vector<std::shared_ptr<net::AcceptLoop>> loops_;
};

}  // namespace npu_run::rdzv
