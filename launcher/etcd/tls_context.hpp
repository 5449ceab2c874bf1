// The TLS side of etcd's https members (torchrun's cacert/ca_cert, cert/ssl_cert and
// key/ssl_cert_key): one client context for every connection of a job, made once at the start
// so a wrong file is named before anything is sent.
#pragma once

#include <memory>
#include <string>

namespace boost::asio::ssl {
class context;
}  // namespace boost::asio::ssl

namespace npu_run::etcd {

struct TlsFiles {
  std::string ca_file;    // the CA that signed the members' certificates; "": the system's
  std::string cert_file;  // this client's certificate (etcd's --client-cert-auth); "": none
  std::string key_file;   // its private key, with cert_file
};

// TLS 1.2 or newer, the member's certificate verified against `ca_file` (or the system's store,
// which OpenSSL's SSL_CERT_FILE and SSL_CERT_DIR move). Throws std::runtime_error naming the
// file and what OpenSSL found wrong with it (not PEM, a key that does not match the certificate).
std::shared_ptr<boost::asio::ssl::context> make_tls_context(const TlsFiles& files);

}  // namespace npu_run::etcd
