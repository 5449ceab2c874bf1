// A real etcd cluster for tests (Debian's etcd-server, installed by scripts/install_deps.sh):
// members on loopback with ports nobody uses, data in a directory of their own, started and
// stopped by pid (the package starts no service in a container). A missing etcd fails the
// test, naming the fix: a test of the etcd rendezvous that silently skipped could never fail.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <string>
#include <vector>

#include "support/temp_dir.hpp"

namespace npu_run::testing {

class EtcdCluster {
 public:
  // Starts `members` members and waits (up to 30 s) until the cluster takes a write.
  explicit EtcdCluster(int members = 3);
  ~EtcdCluster();  // SIGKILLs every member
  EtcdCluster(const EtcdCluster&) = delete;
  EtcdCluster& operator=(const EtcdCluster&) = delete;

  // "127.0.0.1:P1,127.0.0.1:P2,..." (torchrun's --rdzv-endpoint form).
  std::string endpoints() const;
  int client_port(int member) const { return members_.at(static_cast<size_t>(member)).client; }
  // SIGKILL one member (its data stays); start() brings it back with the same data.
  void kill(int member);
  void start(int member);
  // The member's own log, for failure messages.
  std::string log(int member) const;

 private:
  struct Member {
    std::string name;
    int client = 0;
    int peer = 0;
    pid_t pid = 0;
  };
  void wait_until_ready(std::chrono::milliseconds limit) const;
  std::vector<Member> members_;
  TempDir dir_;
  std::string initial_cluster_;
};

}  // namespace npu_run::testing
