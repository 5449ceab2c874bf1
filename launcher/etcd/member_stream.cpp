#include "etcd/member_stream.hpp"

#include <fmt/format.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl/host_name_verification.hpp>
#include <stdexcept>

#include "net/cloexec_socket.hpp"

namespace npu_run::etcd {

namespace {

namespace asio = boost::asio;
namespace beast = boost::beast;
using tcp = asio::ip::tcp;

bool is_address(const std::string& host) {
  boost::system::error_code ec;
  (void)asio::ip::make_address(host, ec);
  return !ec;
}

}  // namespace

MemberStream::MemberStream(asio::io_context& io, Endpoint member,
                           std::shared_ptr<asio::ssl::context> tls)
    : member_(std::move(member)), tls_(std::move(tls)) {
  if (!member_.tls) {
    plain_.emplace(io);
    return;
  }
  if (!tls_) throw std::logic_error("an https etcd member without a TLS context");
  secure_.emplace(io, *tls_);
}

beast::tcp_stream& MemberStream::tcp() {
  return secure_ ? secure_->next_layer() : *plain_;
}

// Under TLS 1.3 the member judges this client's certificate after the client's handshake is
// done: its refusal is an alert on the first read. Either way, it is named as a refusal.
std::string MemberStream::describe(const boost::system::error_code& e) {
  if (!secure_ || e.category() != asio::error::get_ssl_category()) return e.message();
  const long verdict = ::SSL_get_verify_result(secure_->native_handle());
  const bool refused = verdict != X509_V_OK || e.message().find("alert") != std::string::npos;
  std::string why = fmt::format("{}: {}", refused ? kCertificateRefused : "TLS", e.message());
  if (verdict != X509_V_OK) why += fmt::format(" ({})", ::X509_verify_cert_error_string(verdict));
  return why;
}

void MemberStream::close() {
  boost::system::error_code ignored;
  tcp().socket().close(ignored);
}

void MemberStream::open(std::chrono::milliseconds timeout,
                        std::function<void(const std::string&)> done) {
  boost::system::error_code ec;
  tcp::resolver resolver(tcp().get_executor());
  const auto addresses = resolver.resolve(member_.host, std::to_string(member_.port), ec);
  if (ec || addresses.empty()) return done(ec ? ec.message() : "no address");
  const tcp::endpoint address = *addresses.begin();
  net::open_cloexec(tcp().socket(), address.protocol(), ec);
  if (ec) return done(ec.message());
  tcp().expires_after(timeout);
  tcp().async_connect(address, [this, done = std::move(done)](boost::system::error_code e) {
    if (e) return done(e.message());
    if (!secure_) return done("");
    handshake(done);
  });
}

// SNI for a name (not for an address), then the handshake; the certificate must chain to the CA
// and carry the member's name or address (X509_check_host / X509_check_ip_asc).
void MemberStream::handshake(std::function<void(const std::string&)> done) {
  SSL* ssl = secure_->native_handle();
  if (!is_address(member_.host)) ::SSL_set_tlsext_host_name(ssl, member_.host.c_str());
  secure_->set_verify_callback(asio::ssl::host_name_verification(member_.host));
  secure_->async_handshake(asio::ssl::stream_base::client,
                           [this, done = std::move(done)](boost::system::error_code e) {
                             // Aborted: the stream may be gone; it is not to be looked at.
                             if (e == asio::error::operation_aborted) return done(e.message());
                             done(e ? describe(e) : "");
                           });
}

}  // namespace npu_run::etcd
