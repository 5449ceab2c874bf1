#include "net/line_socket.hpp"

#include <fmt/format.h>
#include <sys/un.h>
#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/read_until.hpp>
#include <boost/asio/streambuf.hpp>
#include <boost/asio/write.hpp>
#include <map>
#include <stdexcept>

#include "net/accept_loop.hpp"
#include "net/cloexec_socket.hpp"

namespace npu_run::net {

namespace asio = boost::asio;
using UnixStream = asio::local::stream_protocol;

namespace {

struct Conversation {
  Conversation(UnixStream::socket s, size_t max_line) : stream(std::move(s)), input(max_line + 1) {}
  UnixStream::socket stream;
  asio::streambuf input;  // bounded: a line past max_line fails the read
  std::string output;
};

}  // namespace

struct LineSocket::Impl : std::enable_shared_from_this<Impl> {
  Impl(asio::io_context& io, std::string socket_path, Answer a, Closed c, size_t max_conns,
       size_t line_limit)
      : path(std::move(socket_path)),
        answer(std::move(a)),
        closed(std::move(c)),
        max_connections(max_conns),
        max_line(line_limit),
        listener(io) {
    if (path.size() >= sizeof(sockaddr_un::sun_path))
      throw std::runtime_error(fmt::format("{}: too long for a socket's path", path));
    boost::system::error_code ec;
    open_cloexec(listener, UnixStream(), ec);
    if (!ec) listener.bind(UnixStream::endpoint(path), ec);
    if (!ec) listener.listen(UnixStream::acceptor::max_listen_connections, ec);
    if (ec) throw std::runtime_error(fmt::format("{}: {}", path, ec.message()));
  }

  void start() {
    accepting = LocalAcceptLoop::start(listener, "npu_run snapshot socket",
                                       [weak = weak_from_this()](UnixStream::socket socket) {
                                         if (auto self = weak.lock()) self->take(std::move(socket));
                                       });
  }

  void take(UnixStream::socket socket) {
    if (open.size() >= max_connections) return;  // busy: closed as it goes out of scope
    const uint64_t id = next_id++;
    auto conversation = std::make_shared<Conversation>(std::move(socket), max_line);
    open.emplace(id, conversation);
    read(id, conversation);
  }

  void read(uint64_t id, const std::shared_ptr<Conversation>& c) {
    asio::async_read_until(
        c->stream, c->input, '\n',
        [weak = weak_from_this(), id, c](boost::system::error_code ec, size_t length) {
          auto self = weak.lock();
          if (!self || !self->open.count(id)) return;
          if (ec) return self->end(id);
          std::string line(asio::buffers_begin(c->input.data()),
                           asio::buffers_begin(c->input.data()) + static_cast<long>(length) - 1);
          c->input.consume(length);
          std::optional<std::string> reply = self->answer(id, line);
          if (!self->open.count(id) || !reply) return;  // the handler ended it, or answers later
          c->output = std::move(*reply) + "\n";
          self->write(id, c);
        });
  }

  void write(uint64_t id, const std::shared_ptr<Conversation>& c) {
    asio::async_write(c->stream, asio::buffer(c->output),
                      [weak = weak_from_this(), id, c](boost::system::error_code ec, size_t) {
                        auto self = weak.lock();
                        if (!self || !self->open.count(id)) return;
                        if (ec) return self->end(id);
                        self->read(id, c);
                      });
  }

  void end(uint64_t id) {
    const auto it = open.find(id);
    if (it == open.end()) return;
    boost::system::error_code ignored;
    it->second->stream.close(ignored);
    open.erase(it);
    closed(id);
  }

  void close() {
    if (accepting) accepting->stop();
    boost::system::error_code ignored;
    listener.close(ignored);
    for (auto& [id, c] : open) c->stream.close(ignored);
    open.clear();
    ::unlink(path.c_str());
  }

  std::string path;
  Answer answer;
  Closed closed;
  size_t max_connections;
  size_t max_line;
  UnixStream::acceptor listener;
  std::shared_ptr<LocalAcceptLoop> accepting;
  std::map<uint64_t, std::shared_ptr<Conversation>> open;
  uint64_t next_id = 1;
};

LineSocket::LineSocket(asio::io_context& io, std::string path, Answer answer, Closed closed,
                       size_t max_connections, size_t max_line)
    : impl_(std::make_shared<Impl>(io, std::move(path), std::move(answer), std::move(closed),
                                   max_connections, max_line)) {
  impl_->start();
}

LineSocket::~LineSocket() {
  impl_->close();
}

size_t LineSocket::connections() const {
  return impl_->open.size();
}

void LineSocket::reply(uint64_t id, const std::string& line) {
  const auto it = impl_->open.find(id);
  if (it == impl_->open.end()) return;
  it->second->output = line + "\n";
  impl_->write(id, it->second);
}

}  // namespace npu_run::net
