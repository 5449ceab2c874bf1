#include "rendezvous/client/server_dialer.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <boost/asio/post.hpp>

#include "basics/durations.hpp"
#include "net/cloexec_socket.hpp"

namespace npu_run::rdzv {

namespace asio = boost::asio;
using tcp = asio::ip::tcp;
using std::chrono::milliseconds;

namespace {

// Backoff between connection attempts: doubles from 10 ms up to 2 s (by default), each delay drawn
// uniformly from half to one and a half times the nominal value so that thousands of agents
// started together do not retry in lockstep. The first retries are short because the usual
// refusal is node 0's agent still starting, milliseconds behind the others (a refused connect
// on a LAN costs one RST).
// By default one connect attempt may wait 10 s (SYNs to a host whose listen queue is full are
// retransmitted by the kernel; cutting the attempt short would only restart that).
constexpr milliseconds kFirstRetry{10};
// How often to say where we are while the server is unreachable.
constexpr milliseconds kWaitingLogInterval{30'000};

}  // namespace

std::shared_ptr<ServerDialer> ServerDialer::create(asio::io_context& io, std::string host, int port,
                                                   milliseconds timeout, DialPolicy policy) {
  return std::shared_ptr<ServerDialer>(
      new ServerDialer(io, std::move(host), port, timeout, policy));
}

ServerDialer::ServerDialer(asio::io_context& io, std::string host, int port, milliseconds timeout,
                           DialPolicy policy)
    : io_(io),
      host_(std::move(host)),
      port_(port),
      timeout_(timeout),
      policy_(policy),
      resolver_(io),
      socket_(io),
      retry_timer_(io),
      attempt_timer_(io),
      rng_(std::random_device{}()),
      backoff_(kFirstRetry) {}

std::string ServerDialer::endpoint() const {
  // An IPv6 address is set off by brackets, as it is written in --rdzv-endpoint.
  return host_.find(':') != std::string::npos ? fmt::format("[{}]:{}", host_, port_)
                                              : fmt::format("{}:{}", host_, port_);
}

milliseconds ServerDialer::time_left() const {
  return std::max(milliseconds(1),
                  std::chrono::duration_cast<milliseconds>(deadline_ - Clock::now()));
}

void ServerDialer::start(Handlers handlers) {
  handlers_ = std::move(handlers);
  const auto now = Clock::now();
  deadline_ = now + timeout_;
  last_waiting_log_ = now;
  started_ms_ = std::chrono::duration_cast<std::chrono::milliseconds>(
                    std::chrono::system_clock::now().time_since_epoch())
                    .count();
  attempt();
}

void ServerDialer::cancel() {
  cancelled_ = true;
  handlers_ = {};
  resolver_.cancel();
  retry_timer_.cancel();
  attempt_timer_.cancel();
  boost::system::error_code ignored;
  socket_.close(ignored);
}

void ServerDialer::attempt() {
  // An IP literal needs no lookup: skipping the resolver avoids its background thread, in
  // every agent and per connection of a storm.
  boost::system::error_code literal_ec;
  const auto literal = asio::ip::make_address(host_, literal_ec);
  if (!literal_ec) {
    connect({tcp::endpoint(literal, static_cast<unsigned short>(port_))});
    return;
  }
  resolver_.async_resolve(
      host_, std::to_string(port_),
      [self = shared_from_this()](boost::system::error_code ec,
                                  const tcp::resolver::results_type& results) {
        if (self->cancelled_) return;
        self->unresolved_ = static_cast<bool>(ec);
        if (ec) {
          self->retry(fmt::format("cannot resolve '{}': {}", self->host_, ec.message()));
          return;
        }
        std::vector<tcp::endpoint> endpoints;
        for (const auto& entry : results) endpoints.push_back(entry.endpoint());
        self->connect(std::move(endpoints));
      });
}

void ServerDialer::connect(std::vector<tcp::endpoint> endpoints) {
  endpoints_ = std::move(endpoints);
  if (endpoints_.empty()) {
    retry(fmt::format("'{}' resolved to no address", host_));
    return;
  }
  attempt_timer_.expires_after(std::min(policy_.attempt_timeout, time_left()));
  attempt_timer_.async_wait(
      [weak = std::weak_ptr<ServerDialer>(shared_from_this())](boost::system::error_code ec) {
        // The connect may have completed (and the socket moved on) after this wait expired:
        // cancelling nothing is fine, and must not throw.
        boost::system::error_code ignored;
        if (auto self = weak.lock(); self && !ec) self->socket_.cancel(ignored);
      });
  connect_to(0);
}

void ServerDialer::connect_to(size_t index) {
  // Opened here, not by async_connect, so that the socket is close-on-exec from the start.
  boost::system::error_code ec;
  socket_.close(ec);
  net::open_cloexec(socket_, endpoints_[index].protocol(), ec);
  auto done = [self = shared_from_this(), index](boost::system::error_code connect_ec) {
    if (self->cancelled_) return;
    if (connect_ec && connect_ec != asio::error::operation_aborted &&
        index + 1 < self->endpoints_.size()) {
      self->connect_to(index + 1);
      return;
    }
    self->attempt_timer_.cancel();
    if (connect_ec) {
      boost::system::error_code ignored;
      self->socket_.close(ignored);
      if (connect_ec == asio::error::connection_refused && self->policy_.refusal_is_final) {
        self->last_error_ = connect_ec.message();
        if (auto gave_up = std::move(self->handlers_.gave_up)) {
          self->handlers_ = {};
          gave_up(
              fmt::format("the rendezvous server at {} refused a new connection: nothing "
                          "listens there any more",
                          self->endpoint()));
        }
        return;
      }
      self->retry(connect_ec == asio::error::operation_aborted ? "connection attempt timed out"
                                                               : connect_ec.message());
      return;
    }
    tcp::socket connected = std::move(self->socket_);
    self->socket_ = tcp::socket(self->io_);  // for the next attempt, should this one die
    if (self->handlers_.connected) self->handlers_.connected(std::move(connected));
  };
  if (ec) {
    asio::post(io_, [done = std::move(done), ec] { done(ec); });
    return;
  }
  socket_.async_connect(endpoints_[index], std::move(done));
}

void ServerDialer::retry(const std::string& error) {
  if (cancelled_) return;
  last_error_ = error;
  const auto now = Clock::now();
  if (now >= deadline_) {
    give_up(error);
    return;
  }
  if (attempts_++ == 0 || now - last_waiting_log_ >= kWaitingLogInterval) log_waiting(error, now);
  std::uniform_real_distribution<double> jitter(0.5, 1.5);
  const auto delay = std::min(
      time_left(),
      milliseconds(static_cast<long>(static_cast<double>(backoff_.count()) * jitter(rng_))));
  backoff_ = std::min(policy_.max_backoff, backoff_ * 2);
  retry_timer_.expires_after(delay);
  retry_timer_.async_wait([self = shared_from_this()](boost::system::error_code ec) {
    if (!ec && !self->cancelled_) self->attempt();
  });
}

void ServerDialer::log_waiting(const std::string& error, Clock::time_point now) {
  last_waiting_log_ = now;
  spdlog::info("waiting for the rendezvous server at {} ({}); retrying for up to {:.0f} s more",
               endpoint(), error,
               seconds(std::chrono::duration_cast<milliseconds>(deadline_ - now)));
}

void ServerDialer::give_up(const std::string& error) {
  // A name nothing resolves needs another fix than a server that does not answer.
  const char* fix = unresolved_
                        ? "give --master-addr as an IP address, or make the name resolvable here "
                          "(/etc/hosts or DNS; the static npu_run uses no other name service)"
                        : "is node 0's npu_run (or npu_run rdzv-server) running there, and is "
                          "--master-addr/--master-port right?";
  auto gave_up = std::move(handlers_.gave_up);
  handlers_ = {};
  if (gave_up) {
    gave_up(
        fmt::format("cannot reach the rendezvous server at {} within {:.0f} s (last error: {}); {}",
                    endpoint(), seconds(timeout_), error, fix));
  }
}

}  // namespace npu_run::rdzv
