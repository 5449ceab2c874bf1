// A TCP relay on 127.0.0.1 to one target port, whose link can be cut: after cut(), the relayed
// connections stall (nothing passes either way, nothing is closed) and new ones are accepted
// and never answered, as when a host's network to the target is dropped by a firewall. Lets a
// test cut one agent off from etcd while the others still reach it. restore() lets new
// connections through again; those opened before it stay stalled for good, as requests an etcd
// member dropped while it had no leader are never answered. Runs on a thread of its own;
// stopped and joined on destruction.
#pragma once

#include <atomic>
#include <thread>
#include <vector>

namespace npu_run::testing {

class CutProxy {
 public:
  explicit CutProxy(int target_port);
  ~CutProxy();
  CutProxy(const CutProxy&) = delete;
  CutProxy& operator=(const CutProxy&) = delete;

  int port() const { return port_; }
  void cut() { cut_ = true; }
  void restore() {
    ++restores_;
    cut_ = false;
  }

 private:
  void run();
  void relay_ready(std::vector<int>& pairs, size_t index);

  int listener_ = -1;
  int port_ = 0;
  int target_port_;
  int wake_[2] = {-1, -1};  // the destructor writes here to end run()
  std::atomic<bool> cut_{false};
  std::atomic<int> restores_{0};
  std::thread thread_;
};

}  // namespace npu_run::testing
