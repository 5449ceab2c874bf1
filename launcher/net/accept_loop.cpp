#include "net/accept_loop.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <sys/resource.h>

#include <boost/asio/post.hpp>
#include <cerrno>
#include <utility>

#include "net/cloexec_socket.hpp"

namespace npu_run::net {

namespace asio = boost::asio;

namespace {

constexpr int kPerTurn = 64;
constexpr auto kRetry = std::chrono::milliseconds(100);
constexpr auto kWarningInterval = std::chrono::seconds(10);

std::string fix_for(const boost::system::error_code& ec) {
  if (ec == asio::error::no_descriptors) {
    rlimit limit{};
    ::getrlimit(RLIMIT_NOFILE, &limit);
    return fmt::format(
        " (EMFILE: this process may open {} files); raise the limit for npu_run (ulimit -n, "
        "LimitNOFILE= in a systemd unit, or /etc/security/limits.conf)",
        limit.rlim_cur);
  }
  if (ec.value() == ENFILE) return " (ENFILE: the system's file table is full); raise fs.file-max";
  return "";
}

}  // namespace

template <typename Protocol>
BasicAcceptLoop<Protocol>::BasicAcceptLoop(Acceptor& acceptor, std::string what, Handler handler)
    : acceptor_(acceptor),
      what_(std::move(what)),
      handler_(std::move(handler)),
      retry_(acceptor.get_executor()) {}

template <typename Protocol>
std::shared_ptr<BasicAcceptLoop<Protocol>> BasicAcceptLoop<Protocol>::start(Acceptor& acceptor,
                                                                            std::string what,
                                                                            Handler handler) {
  boost::system::error_code ec;
  acceptor.non_blocking(true, ec);  // accept4 then takes what is queued until EAGAIN
  if (ec) throw boost::system::system_error(ec, what + ": non-blocking listener");
  auto loop = std::make_shared<BasicAcceptLoop>(acceptor, std::move(what), std::move(handler));
  loop->wait();
  return loop;
}

template <typename Protocol>
void BasicAcceptLoop<Protocol>::stop() {
  stopped_ = true;
  retry_.cancel();
  // A wait still pending returns on its own when the acceptor closes or is destroyed; the
  // flag keeps it from touching either.
}

template <typename Protocol>
void BasicAcceptLoop<Protocol>::wait() {
  acceptor_.async_wait(Acceptor::wait_read,
                       [self = this->shared_from_this()](boost::system::error_code ec) {
                         if (self->stopped_ || ec == asio::error::operation_aborted) return;
                         self->take_queued();
                       });
}

// The rest of a burst is taken from a posted continuation, not after another wait: with an
// edge-triggered reactor the wait would not fire again for connections already queued.
template <typename Protocol>
void BasicAcceptLoop<Protocol>::take_queued() {
  if (stopped_ || !acceptor_.is_open()) return;
  boost::system::error_code ec;
  for (int taken = 0; taken < kPerTurn; ++taken) {
    typename Protocol::socket socket = accept_cloexec(acceptor_, ec);
    if (ec) break;
    handler_(std::move(socket));
    if (stopped_) return;  // the handler may stop the loop
  }
  const bool empty = ec == asio::error::would_block || ec == asio::error::try_again;
  const bool transient = ec == asio::error::connection_aborted || ec == asio::error::interrupted;
  if (!ec || transient) {
    asio::post(acceptor_.get_executor(),
               [self = this->shared_from_this()] { self->take_queued(); });
  } else if (empty) {
    wait();
  } else {
    failed(ec);
  }
}

template <typename Protocol>
void BasicAcceptLoop<Protocol>::failed(const boost::system::error_code& ec) {
  const auto now = std::chrono::steady_clock::now();
  ++failures_;
  if (failures_ == 1 || now - last_warning_ >= kWarningInterval) {
    spdlog::warn("{}: cannot accept connections: {}{}; retrying every 100 ms{}", what_,
                 ec.message(), fix_for(ec),
                 failures_ > 1 ? fmt::format(" ({} failures so far)", failures_) : "");
    last_warning_ = now;
  }
  retry_.expires_after(kRetry);
  retry_.async_wait([self = this->shared_from_this()](boost::system::error_code wait_ec) {
    if (!wait_ec) self->take_queued();
  });
}

template class BasicAcceptLoop<asio::ip::tcp>;
template class BasicAcceptLoop<asio::local::stream_protocol>;

}  // namespace npu_run::net
