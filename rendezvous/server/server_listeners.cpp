#include "rendezvous/server/server_listeners.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "net/cloexec_socket.hpp"
#include "net/kernel_limits.hpp"

namespace npu_run::rdzv {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;

void Listeners::bind(const ServerOptions& options) {
  // The kernel caps any backlog at net.core.somaxconn; asking for exactly that is the most.
  const auto somaxconn = net::kernel_queues().front().value;
  backlog_ = options.backlog > 0 ? options.backlog : static_cast<int>(somaxconn.value_or(4096));
  const auto add = [this](const std::string& address, std::unique_ptr<tcp::acceptor> acceptor) {
    served_.push_back(address.find(':') != std::string::npos ? "[" + address + "]" : address);
    acceptors_.push_back(std::move(acceptor));
  };
  add(options.bind_addr, listen_on(options.bind_addr, options.port));
  for (const std::string& more : options.also_bind) {
    if (more == options.bind_addr) continue;
    try {
      add(more, listen_on(more, port()));
    } catch (const BindError& e) {
      if (e.address_not_local)
        spdlog::debug("{}: not an address of this host, not served", more);
      else
        spdlog::warn("{}; agents must reach the server through another address", e.what());
    }
  }
}

std::unique_ptr<tcp::acceptor> Listeners::listen_on(const std::string& address_text, int port) {
  boost::system::error_code ec;
  const auto address = asio::ip::make_address(address_text, ec);
  if (ec) {
    throw BindError(fmt::format("rendezvous server: '{}' is not an IP address", address_text),
                    false, true);
  }
  const tcp::endpoint endpoint(address, static_cast<unsigned short>(port));
  auto acceptor = std::make_unique<tcp::acceptor>(io_);
  net::open_cloexec(*acceptor, endpoint.protocol(), ec);
  // SO_REUSEADDR: a job restarted right after the last one must not wait out TIME_WAIT.
  if (!ec) acceptor->set_option(tcp::acceptor::reuse_address(true), ec);
  if (!ec) acceptor->bind(endpoint, ec);
  if (ec) {
    const bool in_use = ec == asio::error::address_in_use;
    const bool not_local = ec == boost::system::errc::address_not_available;
    throw BindError(
        fmt::format("rendezvous server: cannot bind {}:{}: {}", address_text, port, ec.message()),
        in_use, not_local);
  }
  acceptor->listen(backlog_, ec);
  // With SO_REUSEADDR, Linux may let bind() succeed next to a listening socket and report the
  // clash only here.
  if (ec) {
    throw BindError(fmt::format("rendezvous server: cannot listen on {}:{}: {}", address_text, port,
                                ec.message()),
                    ec == asio::error::address_in_use, false);
  }
  return acceptor;
}

int Listeners::port() const {
  boost::system::error_code ec;
  return acceptors_.empty() ? 0 : acceptors_.front()->local_endpoint(ec).port();
}

std::vector<std::string> Listeners::endpoints() const {
  std::vector<std::string> endpoints;
  for (const std::string& address : served_)
    endpoints.push_back(fmt::format("{}:{}", address, port()));
  return endpoints;
}

void Listeners::start(const std::function<void(tcp::socket)>& accepted) {
  for (auto& acceptor : acceptors_)
    loops_.push_back(net::AcceptLoop::start(*acceptor, "rendezvous server", accepted));
}

void Listeners::stop() {
  boost::system::error_code ignored;
  for (auto& loop : loops_) loop->stop();
  for (auto& acceptor : acceptors_) acceptor->close(ignored);
}

}  // namespace npu_run::rdzv
