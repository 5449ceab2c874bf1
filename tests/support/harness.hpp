// Runs the real npu_run binary for integration tests: output captured through pipes, waits
// driven by pidfd/poll events with deadlines, and every process it leads to tagged with a unique
// marker environment variable (support/process_census.hpp), so a test can prove that none of
// them is left behind.
#pragma once

#include <poll.h>
#include <sys/types.h>

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "support/fixtures.hpp"
#include "support/process_census.hpp"

namespace npu_run::testing {

using EnvOverrides = std::map<std::string, std::optional<std::string>>;  // nullopt: unset

// In an NpuRunProcess's EnvOverrides: runs npu_run in a UTS namespace of its own with this host
// name (the variable itself reaches npu_run too, unread).
inline constexpr const char* kHostNameVariable = "NPU_RUN_TEST_HOST_NAME";
// In an NpuRunProcess's EnvOverrides, any value: npu_run leads a session and process group of its
// own (pid() is both ids), so that a test can kill them whole.
inline constexpr const char* kOwnSessionVariable = "NPU_RUN_TEST_OWN_SESSION";
using std::chrono::milliseconds;
using namespace std::chrono_literals;

struct Finished {
  int exit_code = -1;  // -1 when killed by a signal
  int term_signal = 0;
  std::string out;
  std::string err;
  double seconds = 0;
};

class NpuRunProcess {
 public:
  // Starts npu_run with `args`. Its environment is the test's without any launcher's variables
  // (SLURM_*, OMPI_*, PET_*, ...), plus PYTHON_EXEC=/usr/bin/python3 unless set, a fresh
  // marker, and `env`.
  explicit NpuRunProcess(const std::vector<std::string>& args, const EnvOverrides& env = {},
                         const std::string& cwd = "");
  // Kills npu_run and anything still carrying the marker, so a failed test cannot leak.
  ~NpuRunProcess();
  NpuRunProcess(const NpuRunProcess&) = delete;
  NpuRunProcess& operator=(const NpuRunProcess&) = delete;

  pid_t pid() const;
  const std::string& marker() const { return marker_; }

  // Reads output until `needle` occurs `count` times in stdout (stderr if `in_stderr`); fails
  // the test after `timeout`.
  void wait_for_output(const std::string& needle, int count, milliseconds timeout,
                       bool in_stderr = false);
  // The same without failing: whether it came within `timeout` (or before npu_run ended).
  bool saw_output(const std::string& needle, int count, milliseconds timeout,
                  bool in_stderr = false);
  void send_signal(int sig);
  // Stops reading npu_run's stdout (its pipe fills and writes to it block), as a paused `less`
  // or a stalled ssh session does; stderr is still read. Then reads it again.
  void pause_stdout();
  // After pause_stdout(): waits until the stdout pipe is full, so npu_run's writes block.
  void wait_until_stdout_full(milliseconds timeout);
  void resume_stdout();
  // Waits for npu_run to exit; on timeout it is killed and the test fails.
  Finished wait(milliseconds timeout);

  // Waits for all of `processes` together (one poll over all their pipes, so none of them can
  // block on a full pipe while another is waited for); on timeout fails with every output.
  static std::vector<Finished> wait_all(const std::vector<NpuRunProcess*>& processes,
                                        milliseconds timeout);

 private:
  bool pump(milliseconds timeout);  // reads what is available; true once npu_run has exited
  void add_pollfds(std::vector<struct pollfd>& fds) const;
  void read_ready(const struct pollfd* fds);  // the three entries add_pollfds() added
  struct State;
  std::unique_ptr<State> state_;
  std::string marker_;
};

// Runs npu_run to completion.
Finished run_npu_run(const std::vector<std::string>& args, const EnvOverrides& env = {},
                     milliseconds timeout = 60s, const std::string& cwd = "");

// Fails the test (naming them) if processes of `p` are still there after 5 s.
void require_no_strays(const NpuRunProcess& p);

}  // namespace npu_run::testing
