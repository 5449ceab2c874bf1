// TerminalInput: what the user types reaches local rank 0, so breakpoint() and pdb work in a
// worker as they do under torchrun. Workers keep their own process groups (the agent stops each
// as one), so a worker reading the terminal itself would be a background job and stop on
// SIGTTIN. Instead, while npu_run runs in the terminal's foreground, the agent reads the
// terminal (through its own open of the tty: no flag of the shell's descriptor changes) and
// writes what arrives into local rank 0's stdin, a pipe. Ctrl-C and Ctrl-Z still reach the
// agent, which acts for the whole job; the terminal's modes are never touched, so there is
// nothing to restore. A stdin that is not a terminal (a file, a pipe from srun or mpirun) is
// simply inherited by local rank 0. Every other rank reads /dev/null.
#pragma once

#include <array>
#include <boost/asio/io_context.hpp>
#include <boost/asio/posix/stream_descriptor.hpp>
#include <memory>

namespace npu_run {

class TerminalInput {
 public:
  enum class Source : uint8_t {
    kNothing,   // /dev/null (no stdin, /dev/null itself, or a terminal npu_run is in the background
                // of)
    kInherit,   // npu_run's own stdin, handed on
    kTerminal,  // the terminal, forwarded by the agent
  };

  // Decides from fd 0 and, while alive, serves the terminal if that is the source. One at a time.
  explicit TerminalInput(boost::asio::io_context& io);
  ~TerminalInput();
  TerminalInput(const TerminalInput&) = delete;
  TerminalInput& operator=(const TerminalInput&) = delete;

  Source source() const { return source_; }
  // The write end of the new local rank 0's stdin pipe (owned from now on); a previous
  // worker's is closed.
  void attach(int write_fd);

 private:
  void read_more();
  void write_out(size_t n);

  boost::asio::io_context& io_;
  Source source_ = Source::kNothing;
  std::unique_ptr<boost::asio::posix::stream_descriptor> tty_;
  std::unique_ptr<boost::asio::posix::stream_descriptor> worker_;
  std::array<char, 4096> buffer_{};
  // Handlers still queued when this is destroyed see it expired and touch nothing.
  std::shared_ptr<int> alive_ = std::make_shared<int>(0);
  bool reading_ = false;
  bool writing_ = false;
  unsigned generation_ =
      0;  // which attach() the open pipe came from  // buffer_ is being written to the worker
};

// The TerminalInput alive now, or nullptr (tests that start workers without an agent).
TerminalInput* current_terminal_input();

}  // namespace npu_run
