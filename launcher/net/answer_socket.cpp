#include "net/answer_socket.hpp"

#include <fmt/format.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <cerrno>
#include <cstring>
#include <stdexcept>

namespace npu_run::net {

namespace asio = boost::asio;

namespace {

// One connection: its answer, or the timeout's, then closed.
struct Waiting : std::enable_shared_from_this<Waiting> {
  Waiting(asio::io_context& io, int fd) : stream(io, fd), timer(io) {}
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
  asio::posix::stream_descriptor stream;
  asio::steady_timer timer;
  std::string text;
  bool answered = false;
};

}  // namespace

struct AnswerSocket::Impl : std::enable_shared_from_this<Impl> {
  Impl(asio::io_context& io_context, std::string socket_path, Provider p,
       std::chrono::milliseconds t, std::string timeout_answer)
      : io(io_context),
        path(std::move(socket_path)),
        provider(std::move(p)),
        timeout(t),
        on_timeout(std::move(timeout_answer)),
        listener(io_context) {
    sockaddr_un address{};
    if (path.size() >= sizeof address.sun_path)
      throw std::runtime_error(fmt::format("{}: too long for a socket's path", path));
    const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) throw std::runtime_error(fmt::format("socket: {}", std::strerror(errno)));
    address.sun_family = AF_UNIX;
    std::memcpy(address.sun_path, path.c_str(), path.size() + 1);
    if (::bind(fd, reinterpret_cast<const sockaddr*>(&address), sizeof address) != 0 ||
        ::listen(fd, static_cast<int>(kMaxWaiting)) != 0) {
      const int err = errno;
      ::close(fd);
      throw std::runtime_error(fmt::format("{}: {}", path, std::strerror(err)));
    }
    listener.assign(fd);
  }

  void wait() {
    listener.async_wait(asio::posix::stream_descriptor::wait_read,
                        [weak = weak_from_this()](boost::system::error_code ec) {
                          auto self = weak.lock();
                          if (ec || !self) return;
                          self->take_queued();
                          self->wait();
                        });
  }

  void take_queued() {
    for (size_t i = 0; i < kMaxWaiting; ++i) {
      const int fd =
          ::accept4(listener.native_handle(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
      if (fd < 0) return;  // empty queue, or an error the next wake-up meets again
      if (waiting >= kMaxWaiting) {
        ::close(fd);  // busy: the asker sees the connection closed unanswered
        continue;
      }
      ++waiting;
      auto conn = std::make_shared<Waiting>(io, fd);
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
  }

  void close() {
    boost::system::error_code ignored;
    listener.close(ignored);
    ::unlink(path.c_str());
  }

  asio::io_context& io;
  std::string path;
  Provider provider;
  std::chrono::milliseconds timeout;
  std::string on_timeout;
  asio::posix::stream_descriptor listener;
  size_t waiting = 0;
};

AnswerSocket::AnswerSocket(asio::io_context& io, std::string path, Provider provider,
                           std::chrono::milliseconds timeout, std::string on_timeout)
    : impl_(std::make_shared<Impl>(io, std::move(path), std::move(provider), timeout,
                                   std::move(on_timeout))) {
  impl_->wait();
}

AnswerSocket::~AnswerSocket() {
  impl_->close();
}

}  // namespace npu_run::net
