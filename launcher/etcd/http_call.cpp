#include "etcd/http_call.hpp"

#include <boost/beast/http.hpp>
#include <memory>
#include <optional>

#include "etcd/member_stream.hpp"

namespace npu_run::etcd {

namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;

class Exchange : public std::enable_shared_from_this<Exchange> {
 public:
  Exchange(asio::io_context& io, const PostTarget& target, HttpHandler handler,
           std::shared_ptr<MemberStream> kept)
      : io_(io),
        member_(target.member),
        tls_(target.tls),
        stream_(kept ? std::move(kept) : std::make_shared<MemberStream>(io, member_, tls_)),
        reused_(stream_->tcp().socket().is_open()),
        handler_(std::move(handler)) {}

  void start(const PostTarget& target, std::string body, const std::string& auth_token,
             std::chrono::milliseconds timeout) {
    request_ = {http::verb::post, target.path, 11};
    request_.set(http::field::host, target.member.to_string());
    request_.set(http::field::content_type, "application/json");
    if (!auth_token.empty()) request_.set(http::field::authorization, auth_token);
    request_.body() = std::move(body);
    request_.prepare_payload();
    timeout_ = timeout;
    if (reused_) {
      stream_->tcp().expires_after(timeout_);
      return write();
    }
    open();
  }

 private:
  // The deadline set by open() covers the whole exchange.
  void open() {
    stream_->open(timeout_, [self = shared_from_this()](const std::string& failure) {
      if (!failure.empty()) return self->finish(failure);
      self->write();
    });
  }

  void write() {
    parser_.emplace();
    parser_->body_limit(kMaxAnswerBytes);
    parser_->header_limit(64 * 1024);
    buffer_.clear();
    stream_->visit([this](auto& stream) {
      http::async_write(stream, request_,
                        [self = shared_from_this()](boost::system::error_code e, size_t) {
                          if (e) return self->failed(e);
                          self->read();
                        });
    });
  }

  void read() {
    stream_->visit([this](auto& stream) {
      http::async_read(stream, buffer_, *parser_,
                       [self = shared_from_this()](boost::system::error_code e, size_t) {
                         if (e) return self->failed(e);
                         self->finish("");
                       });
    });
  }

  // A kept connection the member closed while it was idle fails before any answer: the
  // (idempotent) request goes again on a new one.
  void failed(const boost::system::error_code& e) {
    if (reused_ && !parser_->is_header_done() && e != beast::error::timeout) {
      reused_ = false;
      stream_->close();
      stream_ = std::make_shared<MemberStream>(io_, member_, tls_);
      return open();
    }
    finish(stream_->describe(e));
  }

  void finish(const std::string& failure) {
    HttpAnswer answer;
    if (failure.empty()) {
      answer.status = static_cast<int>(parser_->get().result_int());
      answer.body = std::move(parser_->get().body());
      if (parser_->get().keep_alive()) {
        stream_->tcp().expires_never();
        answer.reusable = stream_;
      }
    }
    if (!answer.reusable) stream_->close();
    // Posted: a handler that starts the next call never runs inside this one's start().
    asio::post(io_, [handler = std::move(handler_), failure, answer = std::move(answer)]() mutable {
      handler(failure, std::move(answer));
    });
  }

  asio::io_context& io_;
  Endpoint member_;
  std::shared_ptr<asio::ssl::context> tls_;
  std::shared_ptr<MemberStream> stream_;
  bool reused_;
  HttpHandler handler_;
  std::chrono::milliseconds timeout_{0};
  http::request<http::string_body> request_;
  beast::flat_buffer buffer_;
  std::optional<http::response_parser<http::string_body>> parser_;
};

}  // namespace

void post_json(asio::io_context& io, const PostTarget& target, std::string body,
               const std::string& auth_token, std::chrono::milliseconds timeout,
               HttpHandler handler, std::shared_ptr<MemberStream> kept) {
  std::make_shared<Exchange>(io, target, std::move(handler), std::move(kept))
      ->start(target, std::move(body), auth_token, timeout);
}

}  // namespace npu_run::etcd
