#include "net/answer_socket.hpp"

#include <fmt/format.h>
#include <sys/un.h>
#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <stdexcept>

#include "net/accept_loop.hpp"
#include "net/cloexec_socket.hpp"

namespace npu_run::net {

namespace asio = boost::asio;

namespace {

using Local = asio::local::stream_protocol;

// One connection: its answer, or the timeout's, then closed.
struct Waiting : std::enable_shared_from_this<Waiting> {
  explicit Waiting(Local::socket s) : stream(std::move(s)), timer(stream.get_executor()) {}
  // Sends `message` and closes; an asker that does not read it within `timeout` is closed
  // unanswered.
  void answer(std::string message, std::chrono::milliseconds timeout) {
    if (answered) return;
    answered = true;
    text = std::move(message);
    timer.expires_after(timeout);
    timer.async_wait([self = shared_from_this()](boost::system::error_code ec) {
      if (ec) return;
      boost::system::error_code ignored;
      self->stream.close(ignored);
    });
    asio::async_write(stream, asio::buffer(text),
                      [self = shared_from_this()](boost::system::error_code, size_t) {
                        self->timer.cancel();
                        boost::system::error_code ignored;
                        self->stream.close(ignored);
                      });
  }
  Local::socket stream;
  asio::steady_timer timer;
  std::string text;
  bool answered = false;
};

}  // namespace

struct AnswerSocket::Impl : std::enable_shared_from_this<Impl> {
  Impl(asio::io_context& io, std::string socket_path, Provider p, std::chrono::milliseconds t,
       std::string timeout_answer)
      : path(std::move(socket_path)),
        provider(std::move(p)),
        timeout(t),
        on_timeout(std::move(timeout_answer)),
        listener(io) {
    if (path.size() >= sizeof(sockaddr_un::sun_path))
      throw std::runtime_error(fmt::format("{}: too long for a socket's path", path));
    boost::system::error_code ec;
    open_cloexec(listener, Local(), ec);
    if (!ec) listener.bind(Local::endpoint(path), ec);
    if (!ec) listener.listen(Local::acceptor::max_listen_connections, ec);
    if (ec) throw std::runtime_error(fmt::format("{}: {}", path, ec.message()));
  }

  void start() {
    accepting = LocalAcceptLoop::start(listener, "npu_run status socket",
                                       [weak = weak_from_this()](Local::socket socket) {
                                         if (auto self = weak.lock()) self->take(std::move(socket));
                                       });
  }

  void take(Local::socket socket) {
    if (waiting >= kMaxWaiting) return;  // busy: closed unanswered as it goes out of scope
    ++waiting;
    auto conn = std::make_shared<Waiting>(std::move(socket));
    auto finish = [weak = weak_from_this(), conn, limit = timeout](std::string message) {
      if (conn->answered) return;
      if (auto self = weak.lock()) --self->waiting;
      conn->answer(std::move(message), limit);
    };
    conn->timer.expires_after(timeout);
    conn->timer.async_wait([finish, text = on_timeout](boost::system::error_code ec) {
      if (!ec) finish(text);
    });
    provider(finish);
  }

  void close() {
    if (accepting) accepting->stop();
    boost::system::error_code ignored;
    listener.close(ignored);
    ::unlink(path.c_str());
  }

  std::string path;
  Provider provider;
  std::chrono::milliseconds timeout;
  std::string on_timeout;
  Local::acceptor listener;
  std::shared_ptr<LocalAcceptLoop> accepting;
  size_t waiting = 0;
};

AnswerSocket::AnswerSocket(asio::io_context& io, std::string path, Provider provider,
                           std::chrono::milliseconds timeout, std::string on_timeout)
    : impl_(std::make_shared<Impl>(io, std::move(path), std::move(provider), timeout,
                                   std::move(on_timeout))) {
  impl_->start();
}

AnswerSocket::~AnswerSocket() {
  impl_->close();
}

}  // namespace npu_run::net
