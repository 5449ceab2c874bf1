#include "agent/records/metrics_server.hpp"

#include <fmt/format.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http.hpp>
#include <deque>

#include "basics/usage_error.hpp"
#include "net/accept_loop.hpp"
#include "net/cloexec_socket.hpp"

namespace npu_run {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

namespace {

// One client: one request, one answer, then the connection closes.
class MetricsSession : public std::enable_shared_from_this<MetricsSession> {
 public:
  MetricsSession(tcp::socket socket, std::function<std::string()> render,
                 std::function<void()> answered)
      : stream_(std::move(socket)), render_(std::move(render)), answered_(std::move(answered)) {}

  void start() {
    parser_.header_limit(static_cast<std::uint32_t>(MetricsServer::kMaxRequest));
    parser_.body_limit(0);
    stream_.expires_after(MetricsServer::kDeadline);
    http::async_read(stream_, buffer_, parser_,
                     [self = shared_from_this()](beast::error_code ec, size_t) {
                       if (ec) return self->close();
                       self->answer(self->parser_.get());
                     });
  }

  void close() {
    beast::error_code ignored;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ignored);
    stream_.close();
  }

 private:
  void answer(const http::request<http::empty_body>& request) {
    response_.version(request.version());
    response_.keep_alive(false);
    response_.set(http::field::server, "npu_run");
    const std::string target(request.target());
    const bool get = request.method() == http::verb::get || request.method() == http::verb::head;
    if (!get) {
      response_.result(http::status::method_not_allowed);
      response_.set(http::field::allow, "GET, HEAD");
      response_.body() = "only GET /metrics is served here\n";
    } else if (target != "/metrics" && target.rfind("/metrics?", 0) != 0 && target != "/") {
      response_.result(http::status::not_found);
      response_.body() = "npu_run serves /metrics\n";
    } else {
      response_.result(http::status::ok);
      response_.set(http::field::content_type, "text/plain; version=0.0.4; charset=utf-8");
      response_.body() = render_();
    }
    response_.prepare_payload();
    if (request.method() == http::verb::head) response_.body().clear();
    answered_();
    stream_.expires_after(MetricsServer::kDeadline);
    http::async_write(stream_, response_,
                      [self = shared_from_this()](beast::error_code, size_t) { self->close(); });
  }

  beast::tcp_stream stream_;
  beast::flat_buffer buffer_{MetricsServer::kMaxRequest};
  http::request_parser<http::empty_body> parser_;
  http::response<http::string_body> response_;
  std::function<std::string()> render_;
  std::function<void()> answered_;
};

}  // namespace

struct MetricsServer::Impl : std::enable_shared_from_this<Impl> {
  Impl(asio::io_context& io, Render r) : acceptor(io), render(std::move(r)) {}

  void bind(const std::string& addr, int port) {
    boost::system::error_code ec;
    const auto address = asio::ip::make_address(addr, ec);
    if (ec) {
      throw UsageError(fmt::format("--metrics-port {}:{}: '{}' is not an IP address of this host",
                                   addr, port, addr));
    }
    const tcp::endpoint endpoint(address, static_cast<unsigned short>(port));
    net::open_cloexec(acceptor, endpoint.protocol(), ec);
    if (!ec) acceptor.set_option(tcp::acceptor::reuse_address(true), ec);
    if (!ec) acceptor.bind(endpoint, ec);
    if (!ec) acceptor.listen(static_cast<int>(kMaxConnections), ec);
    if (ec) {
      throw UsageError(fmt::format(
          "--metrics-port {}:{}: cannot listen: {}{}", addr, port, ec.message(),
          ec == asio::error::address_in_use
              ? "; another program (or another agent on this host) has it: give each agent its own "
                "port"
              : ""));
    }
  }

  void start() {
    loop = net::AcceptLoop::start(acceptor, "metrics", [weak = weak_from_this()](tcp::socket s) {
      if (auto self = weak.lock()) self->serve(std::move(s));
    });
  }

  void serve(tcp::socket socket) {
    // The oldest goes for a newcomer: a client that holds connections open gains nothing.
    while (sessions.size() >= kMaxConnections) {
      if (auto oldest = sessions.front().lock()) oldest->close();
      sessions.pop_front();
    }
    auto session =
        std::make_shared<MetricsSession>(std::move(socket), render, [weak = weak_from_this()] {
          if (auto self = weak.lock()) ++self->answered;
        });
    sessions.push_back(session);
    session->start();
    // Sessions that ended are forgotten as new ones come: the list stays within the cap.
    std::erase_if(sessions, [](const std::weak_ptr<MetricsSession>& s) { return s.expired(); });
  }

  void stop() {
    if (loop) loop->stop();
    boost::system::error_code ignored;
    acceptor.close(ignored);
    for (auto& weak : sessions) {
      if (auto s = weak.lock()) s->close();
    }
    sessions.clear();
  }

  tcp::acceptor acceptor;
  Render render;
  std::shared_ptr<net::AcceptLoop> loop;
  std::deque<std::weak_ptr<MetricsSession>> sessions;
  uint64_t answered = 0;
};

MetricsServer::MetricsServer(asio::io_context& io, const std::string& addr, int port, Render render)
    : impl_(std::make_shared<Impl>(io, std::move(render))) {
  impl_->bind(addr, port);
  impl_->start();
}

MetricsServer::~MetricsServer() {
  impl_->stop();
}

int MetricsServer::port() const {
  boost::system::error_code ec;
  return impl_->acceptor.local_endpoint(ec).port();
}

uint64_t MetricsServer::requests() const {
  return impl_->answered;
}

}  // namespace npu_run
