// Runs the real npu_run binary for integration tests: output captured through pipes, waits
// driven by pidfd/poll events with deadlines, and every process it leads to tagged with a unique
// marker environment variable, so a test can prove that none of them is left behind.
#pragma once

#include <poll.h>
#include <sys/types.h>

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace npu_run::testing {

using EnvOverrides = std::map<std::string, std::optional<std::string>>;  // nullopt: unset
using std::chrono::milliseconds;
using namespace std::chrono_literals;

struct Finished {
  int exit_code = -1;  // -1 when killed by a signal
  int term_signal = 0;
  std::string out;
  std::string err;
  double seconds = 0;
};

inline constexpr const char* kMarkerVariable = "NPU_RUN_TEST_MARKER";

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
  void send_signal(int sig);
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

// Processes (other than this test) whose environment carries `marker`.
std::vector<pid_t> processes_with_marker(const std::string& marker);

// Waits until at least `count` processes carry `marker`; returns how many do at the end. Checks
// /proc every 10 ms: nothing signals that a grandchild finished exec (whose environment reads
// as empty while it is being replaced).
size_t wait_for_marker_processes(const std::string& marker, size_t count, milliseconds timeout);

// Waits, on pidfd events, until no process carries `marker`; returns those left after `timeout`.
std::vector<pid_t> wait_until_no_marker_processes(const std::string& marker, milliseconds timeout);

// Fails the test (naming them) if processes of `p` are still there after 5 s.
void require_no_strays(const NpuRunProcess& p);

// A FIFO a worker blocks on (`read x < gate`) until the test opens it: the test, not a timer,
// decides when the worker proceeds.
std::string make_gate(const std::string& path);
void open_gate(const std::string& path);

// "pid 123 (sleep 60) state S ppid 1" per process, for failure messages.
std::string describe_processes(const std::vector<pid_t>& pids);

// A TCP port that was free a moment ago on 127.0.0.1, for a test's rendezvous.
int unused_port();

std::string npu_run_binary();
std::string source_dir();

size_t count_occurrences(const std::string& text, const std::string& needle);

}  // namespace npu_run::testing
