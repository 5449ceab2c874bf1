#include "etcd/tls_context.hpp"

#include <fmt/format.h>
#include <openssl/ssl.h>

#include <boost/asio/ssl/context.hpp>
#include <stdexcept>

namespace npu_run::etcd {

namespace {

namespace ssl = boost::asio::ssl;

// One step of loading, with the file's role and path in the message when OpenSSL refuses it.
template <class Load>
void load(const char* role, const std::string& path, Load&& step) {
  boost::system::error_code ec;
  step(ec);
  if (ec) throw std::runtime_error(fmt::format("etcd {} {}: {}", role, path, ec.message()));
}

}  // namespace

std::shared_ptr<ssl::context> make_tls_context(const TlsFiles& files) {
  auto context = std::make_shared<ssl::context>(ssl::context::tls_client);
  ::SSL_CTX_set_min_proto_version(context->native_handle(), TLS1_2_VERSION);
  context->set_verify_mode(ssl::verify_peer);
  if (files.ca_file.empty()) {
    load("CA store", "(the system's)", [&](auto& ec) { context->set_default_verify_paths(ec); });
  } else {
    load("CA file (cacert)", files.ca_file,
         [&](auto& ec) { context->load_verify_file(files.ca_file, ec); });
  }
  if (!files.cert_file.empty()) {
    load("client certificate (cert)", files.cert_file,
         [&](auto& ec) { context->use_certificate_chain_file(files.cert_file, ec); });
    load("client key (key)", files.key_file,
         [&](auto& ec) { context->use_private_key_file(files.key_file, ssl::context::pem, ec); });
    if (::SSL_CTX_check_private_key(context->native_handle()) != 1) {
      throw std::runtime_error(
          fmt::format("etcd client key (key) {} is not the key of the certificate {} (cert)",
                      files.key_file, files.cert_file));
    }
  }
  return context;
}

}  // namespace npu_run::etcd
