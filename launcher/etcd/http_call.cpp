#include "etcd/http_call.hpp"

#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <memory>

#include "net/cloexec_socket.hpp"

namespace npu_run::etcd {

namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = asio::ip::tcp;

class Exchange : public std::enable_shared_from_this<Exchange> {
 public:
  Exchange(asio::io_context& io, HttpHandler handler) : stream_(io), handler_(std::move(handler)) {
    parser_.body_limit(kMaxAnswerBytes);
    parser_.header_limit(64 * 1024);
  }

  void start(const Endpoint& member, const std::string& target, std::string body,
             const std::string& auth_token, std::chrono::milliseconds timeout) {
    request_ = {http::verb::post, target, 11};
    request_.set(http::field::host, member.to_string());
    request_.set(http::field::content_type, "application/json");
    if (!auth_token.empty()) request_.set(http::field::authorization, auth_token);
    request_.body() = std::move(body);
    request_.prepare_payload();
    boost::system::error_code ec;
    tcp::resolver resolver(stream_.get_executor());
    const auto addresses = resolver.resolve(member.host, std::to_string(member.port), ec);
    if (ec || addresses.empty()) return finish(ec ? ec : asio::error::host_not_found);
    const tcp::endpoint address = *addresses.begin();
    net::open_cloexec(stream_.socket(), address.protocol(), ec);
    if (ec) return finish(ec);
    stream_.expires_after(timeout);  // the whole exchange
    stream_.async_connect(address, [self = shared_from_this()](boost::system::error_code e) {
      if (e) return self->finish(e);
      self->write();
    });
  }

 private:
  void write() {
    http::async_write(stream_, request_,
                      [self = shared_from_this()](boost::system::error_code e, size_t) {
                        if (e) return self->finish(e);
                        self->read();
                      });
  }

  void read() {
    http::async_read(
        stream_, buffer_, parser_,
        [self = shared_from_this()](boost::system::error_code e, size_t) { self->finish(e); });
  }

  void finish(const boost::system::error_code& ec) {
    boost::system::error_code ignored;
    stream_.socket().close(ignored);
    HttpAnswer answer;
    if (!ec) {
      answer.status = static_cast<int>(parser_.get().result_int());
      answer.body = std::move(parser_.get().body());
    }
    // Posted: a handler that starts the next call never runs inside this one's start().
    asio::post(stream_.get_executor(),
               [handler = std::move(handler_), ec, answer = std::move(answer)]() mutable {
                 handler(ec, std::move(answer));
               });
  }

  beast::tcp_stream stream_;
  HttpHandler handler_;
  http::request<http::string_body> request_;
  beast::flat_buffer buffer_;
  http::response_parser<http::string_body> parser_;
};

}  // namespace

void post_json(asio::io_context& io, const Endpoint& member, const std::string& target,
               std::string body, const std::string& auth_token, std::chrono::milliseconds timeout,
               HttpHandler handler) {
  std::make_shared<Exchange>(io, std::move(handler))
      ->start(member, target, std::move(body), auth_token, timeout);
}

}  // namespace npu_run::etcd
