#include "support/test_ca.hpp"

#include <fmt/format.h>

#include <catch2/catch.hpp>
#include <cstdio>

namespace npu_run::testing {

namespace {

// Runs one openssl command in `dir`; fails the test with its output.
void openssl(const std::string& dir, const std::string& arguments) {
  const std::string command = fmt::format("cd '{}' && openssl {} 2>&1", dir, arguments);
  FILE* pipe = ::popen(command.c_str(), "r");
  REQUIRE(pipe != nullptr);
  std::string output;
  char chunk[512];
  while (size_t n = std::fread(chunk, 1, sizeof chunk, pipe)) output.append(chunk, n);
  const int status = ::pclose(pipe);
  INFO("openssl " << arguments << "\n" << output);
  REQUIRE(status == 0);
}

constexpr const char* kKey = "-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -noenc";

}  // namespace

TestCa::TestCa() {
  make_ca("ca");
  make_ca("other_ca");
  // No CommonName on a client's certificate: with --client-cert-auth and etcd's auth on, etcd's
  // JSON gateway refuses one ("CommonName of client sending a request against gateway will be
  // ignored"), since it cannot carry the name to etcd as the user. Logins say who it is.
  sign("server", "/CN=etcd", "ca",
       "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth,clientAuth\n");
  sign("client", "/O=npu_run test client", "ca", "extendedKeyUsage=clientAuth\n");
  sign("other_client", "/O=npu_run test client", "other_ca", "extendedKeyUsage=clientAuth\n");
}

void TestCa::make_ca(const std::string& name) {
  openssl(dir_.path(), fmt::format("req -x509 {} -keyout {}.key -out {}.pem -days 2 -subj "
                                   "'/CN=npu_run test {}'",
                                   kKey, name, name, name));
}

// A key and a certificate for `subject`, as `name`, signed by `ca`, with X.509v3 `extensions`.
void TestCa::sign(const std::string& name, const std::string& subject, const std::string& ca,
                  const std::string& extensions) {
  dir_.write(name + ".ext", extensions);
  openssl(dir_.path(),
          fmt::format("req {} -keyout {}.key -out {}.csr -subj '{}'", kKey, name, name, subject));
  openssl(dir_.path(), fmt::format("x509 -req -in {0}.csr -CA {1}.pem -CAkey {1}.key "
                                   "-CAcreateserial -out {0}.pem -days 2 -extfile {0}.ext",
                                   name, ca));
}

}  // namespace npu_run::testing
