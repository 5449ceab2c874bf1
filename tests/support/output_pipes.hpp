// The read ends of a child's stdout and stderr, and all that has come through them: one read
// loop, driven by the caller's poll (so several children can be pumped by one poll).
#pragma once

#include <poll.h>

#include <string>
#include <vector>

namespace npu_run::testing {

class OutputPipes {
 public:
  OutputPipes(int out_fd, int err_fd) : fds_{out_fd, err_fd} {}
  ~OutputPipes();
  OutputPipes(const OutputPipes&) = delete;
  OutputPipes& operator=(const OutputPipes&) = delete;

  // Adds two entries to `fds` (a closed pipe's as -1); read_ready() takes them back.
  void add_pollfds(std::vector<struct pollfd>& fds) const;
  // Reads what poll found ready in the two entries at `fds`; EOF closes that pipe.
  void read_ready(const struct pollfd* fds);
  // Reads what is still buffered, until EOF or until nothing comes for `quiet_ms` (a leaked
  // process holding a pipe open must not hang the test).
  void drain(int quiet_ms);
  bool all_closed() const { return fds_[0] < 0 && fds_[1] < 0; }

  const std::string& out() const { return text_[0]; }
  const std::string& err() const { return text_[1]; }

 private:
  int fds_[2];
  std::string text_[2];
};

}  // namespace npu_run::testing
