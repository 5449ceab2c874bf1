// A real etcd cluster for tests (Debian's etcd-server, installed by scripts/install_deps.sh):
// members on loopback with ports nobody uses, data in a directory of their own, started and
// stopped by pid (the package starts no service in a container). A missing etcd fails the
// test, naming the fix: a test of the etcd rendezvous that silently skipped could never fail.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <string>
#include <vector>

#include "etcd/client.hpp"
#include "support/temp_dir.hpp"
#include "support/test_ca.hpp"

namespace npu_run::testing {

class EtcdCluster {
 public:
  // Starts `members` members and waits (up to 30 s) until the cluster takes a write. With `tls`,
  // clients reach them over https only, with a certificate `tls` signed (--client-cert-auth);
  // the members speak to each other in clear text on loopback.
  explicit EtcdCluster(int members = 3, const TestCa* tls = nullptr);
  ~EtcdCluster();  // SIGKILLs every member
  EtcdCluster(const EtcdCluster&) = delete;
  EtcdCluster& operator=(const EtcdCluster&) = delete;

  // "127.0.0.1:P1,127.0.0.1:P2,..." (torchrun's --rdzv-endpoint form), https:// on each with TLS.
  std::string endpoints() const;
  // A client's settings for `member`, or every member with -1 (with TLS: the CA and the client
  // certificate).
  etcd::Settings client_settings(int member = -1) const;
  int client_port(int member) const { return members_.at(static_cast<size_t>(member)).client; }
  // SIGKILL one member (its data stays); start() brings it back with the same data.
  void kill(int member);
  void start(int member);
  // SIGSTOP / SIGCONT one member: etcd frozen, its sockets open (what a hung host looks like).
  void freeze(int member);
  void thaw(int member);
  // The member etcd's raft elected leader (asking each member's status), or -1 when none says.
  int leader() const;
  // The member's own log, for failure messages.
  std::string log(int member) const;

 private:
  struct Member {
    std::string name;
    int client = 0;
    int peer = 0;
    pid_t pid = 0;
  };
  // Where members keep their data: /dev/shm, so that etcd's fsyncs (each raft write, a
  // campaign's included) do not wait on a disk the rest of CI keeps busy.
  static std::string etcd_data_base();
  std::string wait_until_ready(std::chrono::milliseconds limit) const;
  std::string member_file(const Member& m, const char* suffix) const;  // of this attempt
  std::vector<Member> members_;
  const TestCa* tls_;
  TempDir dir_;
  std::string initial_cluster_;
  int attempt_ = 0;  // starts made: a port taken in between costs one more
};

}  // namespace npu_run::testing
