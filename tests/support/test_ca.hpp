// A certificate authority of a test's own, made with Debian's `openssl` command in a temporary
// directory: the CA, a server certificate for 127.0.0.1 and localhost (etcd's members; it
// serves clients and, through etcd's gateway, itself, so it may do both), a client certificate,
// and a second CA nobody trusts, for the "unknown CA" refusals. Keys are P-256: made in
// milliseconds.
#pragma once

#include <string>

#include "support/temp_dir.hpp"

namespace npu_run::testing {

class TestCa {
 public:
  TestCa();  // fails the test, with openssl's output, when a step fails

  std::string ca() const { return dir_.file("ca.pem"); }
  std::string server_cert() const { return dir_.file("server.pem"); }
  std::string server_key() const { return dir_.file("server.key"); }
  std::string client_cert() const { return dir_.file("client.pem"); }
  std::string client_key() const { return dir_.file("client.key"); }
  // A CA of its own, and a client certificate it signed: both unknown to the members.
  std::string other_ca() const { return dir_.file("other_ca.pem"); }
  std::string other_client_cert() const { return dir_.file("other_client.pem"); }
  std::string other_client_key() const { return dir_.file("other_client.key"); }

 private:
  void make_ca(const std::string& name);
  void sign(const std::string& name, const std::string& subject, const std::string& ca,
            const std::string& extensions);
  TempDir dir_;
};

}  // namespace npu_run::testing
