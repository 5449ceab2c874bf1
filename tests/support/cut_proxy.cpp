#include "support/cut_proxy.hpp"

#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <stdexcept>

namespace npu_run::testing {

namespace {

sockaddr_in loopback(int port) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return addr;
}

int connect_to(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr = loopback(port);
  if (fd >= 0 && ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0) return fd;
  if (fd >= 0) ::close(fd);
  return -1;
}

}  // namespace

CutProxy::CutProxy(int target_port) : target_port_(target_port) {
  listener_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr = loopback(0);
  socklen_t len = sizeof addr;
  if (listener_ < 0 || ::bind(listener_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::listen(listener_, 64) != 0 ||
      ::getsockname(listener_, reinterpret_cast<sockaddr*>(&addr), &len) != 0 ||
      ::pipe2(wake_, O_CLOEXEC) != 0)
    throw std::runtime_error("CutProxy: cannot listen on 127.0.0.1");
  port_ = ntohs(addr.sin_port);
  thread_ = std::thread([this] { run(); });
}

CutProxy::~CutProxy() {
  (void)::write(wake_[1], "x", 1);
  thread_.join();
  for (int fd : {listener_, wake_[0], wake_[1]}) ::close(fd);
}

// Descriptors in pairs (client, target); each relays to the other while the link is up.
void CutProxy::run() {
  std::vector<int> pairs;
  std::vector<int> stalled;  // opened before the last restore(): never relayed again
  int restores_seen = 0;
  for (;;) {
    if (restores_ != restores_seen) {
      restores_seen = restores_;
      stalled.insert(stalled.end(), pairs.begin(), pairs.end());
      pairs.clear();
    }
    std::vector<pollfd> fds{{wake_[0], POLLIN, 0}, {listener_, POLLIN, 0}};
    if (!cut_) {
      for (int fd : pairs) fds.push_back({fd, POLLIN, 0});
    }
    if (::poll(fds.data(), fds.size(), 100) < 0) continue;
    if (fds[0].revents != 0) break;
    if (fds[1].revents & POLLIN) {
      const int client = ::accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC);
      const int target = client >= 0 && !cut_ ? connect_to(target_port_) : -1;
      if (client >= 0) pairs.insert(pairs.end(), {client, target});  // target -1: never answered
    }
    for (size_t i = 2; i < fds.size(); ++i) {
      if (fds[i].revents != 0) relay_ready(pairs, i - 2);
    }
  }
  for (const std::vector<int>* fds : {&pairs, &stalled}) {
    for (int fd : *fds) {
      if (fd >= 0) ::close(fd);
    }
  }
}

void CutProxy::relay_ready(std::vector<int>& pairs, size_t index) {
  const int from = pairs[index];
  const int to = pairs[index ^ 1U];
  char buffer[16384];
  const ssize_t n = from >= 0 ? ::read(from, buffer, sizeof buffer) : 0;
  if (n > 0 && to >= 0 && ::send(to, buffer, static_cast<size_t>(n), MSG_NOSIGNAL) == n) return;
  // One end closed or failed: so does the other, as a relay would (poll skips -1).
  for (size_t k : {index & ~size_t{1}, index | 1U}) {
    if (pairs[k] >= 0) ::close(pairs[k]);
    pairs[k] = -1;
  }
}

}  // namespace npu_run::testing
