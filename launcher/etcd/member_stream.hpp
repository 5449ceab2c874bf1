// One connection to one etcd member: TCP, with TLS over it for an https member (Boost.Beast's
// ssl_stream over OpenSSL). The member's certificate must chain to the job's CA and name the
// member's host or address, as curl and etcdctl check it. The socket is close-on-exec
// (net/cloexec_socket.hpp). Reads and writes go through visit(), so one body of code serves both.
#pragma once

#include <boost/asio/io_context.hpp>
#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/ssl/ssl_stream.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "etcd/endpoints.hpp"

namespace npu_run::etcd {

// How a failure starts when the member refused this client's certificate or this client refused
// the member's (an unknown CA, a wrong name): a mistake of the settings, never a passing fault.
inline constexpr const char* kCertificateRefused = "TLS certificate refused";

class MemberStream {
 public:
  // `tls` is the job's context (etcd/tls_context.hpp); an https member needs one.
  MemberStream(boost::asio::io_context& io, Endpoint member,
               std::shared_ptr<boost::asio::ssl::context> tls);

  // Resolves, connects and, for https, shakes hands, all within `timeout`. `done` gets "" once
  // open, else what failed ("Connection refused", "TLS certificate refused: certificate verify
  // failed (unable to get local issuer certificate)").
  void open(std::chrono::milliseconds timeout, std::function<void(const std::string&)> done);

  // The TCP layer: its deadline (expires_after, expires_never) and its socket.
  boost::beast::tcp_stream& tcp();
  void close();
  // What a failed read, write or handshake means, with a refused certificate named as such.
  std::string describe(const boost::system::error_code& e);

  // Calls f with the stream to read and write: the TCP stream, or the TLS one over it.
  template <class F>
  void visit(F&& f) {
    if (secure_) {
      f(*secure_);
    } else {
      f(*plain_);
    }
  }

 private:
  void handshake(std::function<void(const std::string&)> done);

  Endpoint member_;
  std::shared_ptr<boost::asio::ssl::context> tls_;  // kept alive while the stream uses it
  std::optional<boost::beast::tcp_stream> plain_;
  std::optional<boost::beast::ssl_stream<boost::beast::tcp_stream>> secure_;
};

}  // namespace npu_run::etcd
