#include "support/output_pipes.hpp"

#include <unistd.h>

#include <cerrno>

namespace npu_run::testing {

OutputPipes::~OutputPipes() {
  for (int fd : fds_) {
    if (fd >= 0) ::close(fd);
  }
}

void OutputPipes::add_pollfds(std::vector<pollfd>& fds) const {
  for (int fd : fds_) fds.push_back({fd, POLLIN, 0});
}

void OutputPipes::read_ready(const pollfd* fds) {
  char buffer[65536];
  for (int i = 0; i < 2; ++i) {
    if (fds[i].fd < 0 || !(fds[i].revents & (POLLIN | POLLHUP))) continue;
    const ssize_t got = ::read(fds[i].fd, buffer, sizeof(buffer));
    if (got > 0) {
      text_[i].append(buffer, static_cast<size_t>(got));
    } else if (got == 0 || (errno != EINTR && errno != EAGAIN)) {  // EOF, or a broken pipe
      ::close(fds_[i]);
      fds_[i] = -1;
    }
  }
}

void OutputPipes::drain(int quiet_ms) {
  while (!all_closed()) {
    std::vector<pollfd> fds;
    add_pollfds(fds);
    if (::poll(fds.data(), fds.size(), quiet_ms) <= 0) return;
    read_ready(fds.data());
  }
}

}  // namespace npu_run::testing
