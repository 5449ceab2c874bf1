#include "workers/terminal_input.hpp"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <sys/stat.h>
#include <unistd.h>

#include <boost/asio/write.hpp>
#include <csignal>

namespace npu_run {

namespace {

TerminalInput* g_current = nullptr;

bool is_dev_null(int fd) {
  struct stat ours {};
  struct stat null {};
  return ::fstat(fd, &ours) == 0 && ::stat("/dev/null", &null) == 0 && S_ISCHR(ours.st_mode) &&
         ours.st_rdev == null.st_rdev;
}

}  // namespace

TerminalInput* current_terminal_input() {
  return g_current;
}

TerminalInput::TerminalInput(boost::asio::io_context& io) : io_(io) {
  g_current = this;
  // A closed stdin (fstat fails) must not be handed on: the worker's dup2 of it would fail.
  struct stat st {};
  if (::fstat(STDIN_FILENO, &st) != 0 || is_dev_null(STDIN_FILENO)) return;
  if (!::isatty(STDIN_FILENO)) {
    source_ = Source::kInherit;
    return;
  }
  // In the background (npu_run ... &), the terminal belongs to the shell.
  if (::tcgetpgrp(STDIN_FILENO) != ::getpgrp()) return;
  const char* name = ::ttyname(STDIN_FILENO);
  const int fd = name == nullptr ? -1 : ::open(name, O_RDONLY | O_NOCTTY | O_CLOEXEC);
  if (fd < 0) return;
  // Moved to the background later (Ctrl-Z, bg), a read must fail with EIO, not stop the
  // agent; workers get the default back before exec.
  (void)std::signal(SIGTTIN, SIG_IGN);
  tty_ = std::make_unique<boost::asio::posix::stream_descriptor>(io_, fd);
  source_ = Source::kTerminal;
  read_more();
}

TerminalInput::~TerminalInput() {
  g_current = nullptr;
  alive_.reset();
  boost::system::error_code ignored;
  if (tty_) tty_->close(ignored);
  if (worker_) worker_->close(ignored);
}

void TerminalInput::attach(int write_fd) {
  boost::system::error_code ignored;
  if (worker_) worker_->close(ignored);
  worker_ = std::make_unique<boost::asio::posix::stream_descriptor>(io_, write_fd);
  ++generation_;
  if (source_ == Source::kTerminal && !reading_) read_more();
}

void TerminalInput::read_more() {
  if (!tty_ || reading_ || writing_) return;
  reading_ = true;
  tty_->async_read_some(
      boost::asio::buffer(buffer_),
      [this, alive = std::weak_ptr<int>(alive_)](const boost::system::error_code& ec, size_t n) {
        if (alive.expired()) return;  // destroyed with the read pending
        reading_ = false;
        if (ec == boost::asio::error::operation_aborted) return;
        if (ec && ec != boost::asio::error::eof) {
          // EIO: npu_run is in the background now; the terminal is not ours.
          spdlog::debug("terminal input ends: {}", ec.message());
          return;
        }
        write_out(n);
      });
}

void TerminalInput::write_out(size_t n) {
  boost::system::error_code ignored;
  if (n == 0) {
    // Ctrl-D: end of input for this worker; a later one (after a restart) gets a fresh pipe.
    if (worker_) worker_->close(ignored);
    worker_.reset();
    return;  // read again once a worker is attached
  }
  if (!worker_ || !worker_->is_open()) {
    read_more();  // nobody reads: typed-ahead text is dropped, as a terminal would on exit
    return;
  }
  // One chunk at a time: the terminal is not read while local rank 0 has not taken the last.
  writing_ = true;
  boost::asio::async_write(*worker_, boost::asio::buffer(buffer_.data(), n),
                           [this, alive = std::weak_ptr<int>(alive_), generation = generation_](
                               const boost::system::error_code& ec, size_t) {
                             if (alive.expired()) return;
                             writing_ = false;
                             // EPIPE: that worker is gone. A pipe attach() replaced meanwhile is
                             // not this one.
                             if (ec && generation == generation_ && worker_) {
                               boost::system::error_code not_needed;
                               worker_->close(not_needed);
                             }
                             read_more();
                           });
}

}  // namespace npu_run
