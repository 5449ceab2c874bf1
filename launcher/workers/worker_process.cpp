#include "workers/worker_process.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <sched.h>
#include <spdlog/spdlog.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <array>
#include <boost/asio/io_context.hpp>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <optional>

#include "basics/descriptors.hpp"
#include "basics/kernel_features.hpp"
#include "workers/boost_process.hpp"
#include "workers/child_setup.hpp"
#include "workers/console.hpp"
#include "workers/escaped_processes.hpp"
#include "workers/exec_report.hpp"
#include "workers/guardian.hpp"
#include "workers/line_copy.hpp"
#include "workers/log_health.hpp"
#include "workers/output_relay.hpp"
#include "workers/python_dump.hpp"
#include "workers/terminal_input.hpp"
#include "workers/worker_exec_setup.hpp"

namespace npu_run {

namespace bp = boost::process::v2;

namespace {

// The child's environment as execve takes it: "NAME=value" strings and a null-terminated array
// of pointers into them, which live as long as this block.
class EnvBlock {
 public:
  explicit EnvBlock(const EnvMap& env) : strings_(to_envp(env)) {
    pointers_.reserve(strings_.size() + 1);
    for (const std::string& kv : strings_) pointers_.push_back(kv.c_str());
    pointers_.push_back(nullptr);
  }
  EnvBlock(const EnvBlock&) = delete;
  EnvBlock& operator=(const EnvBlock&) = delete;
  const char* const* envp() const { return pointers_.data(); }

 private:
  std::vector<std::string> strings_;
  std::vector<const char*> pointers_;
};

// When the worker wrote its torchelastic error file, to the file system's precision (the file's
// own "timestamp" field has whole seconds only); nothing when there is no such file.
std::optional<std::chrono::system_clock::time_point> error_file_time(const std::string& path) {
  std::error_code ec;
  if (path.empty() || !std::filesystem::is_regular_file(path, ec)) return std::nullopt;
  const auto written = std::filesystem::last_write_time(path, ec);
  if (ec) return std::nullopt;
  return std::chrono::time_point_cast<std::chrono::system_clock::duration>(
      std::chrono::file_clock::to_sys(written));
}

// The file's directory is the worker's log_dir, which spawn() has created (or msrun's
// --log_dir, which `npu_run msrun` has).
int open_log_file(const StreamRoute& route) {
  int flags = O_WRONLY | O_CREAT | O_CLOEXEC;
  if (route.shared_file || route.keep_file) flags |= O_APPEND;
  if (!route.keep_file) flags |= O_TRUNC;  // both streams truncate before the child writes
  return ::open(route.file.c_str(), flags, 0644);
}

// ESRCH only means the group is already gone.
void signal_process_group(pid_t pgid, int sig) {
  if (pgid > 0) ::kill(-pgid, sig);
}

}  // namespace

WorkerProcess::WorkerProcess(boost::asio::io_context& io, WorkerSpec spec)
    : io_(io), spec_(std::move(spec)) {
  outcome_.local_rank = spec_.local_rank;
  outcome_.global_rank = spec_.global_rank;
  outcome_.stderr_log = spec_.err.file;
  outcome_.error_file = spec_.error_file;
}

WorkerProcess::~WorkerProcess() {
  if (running_) signal_process_group(outcome_.pid, SIGKILL);
}

bool WorkerProcess::cannot_start(int err, std::string why) {
  not_started(err, std::move(why));
  spdlog::error("cannot start local rank {}: {}", spec_.local_rank, outcome_.start_error);
  return false;
}

void WorkerProcess::not_started(int err, std::string why) {
  outcome_.status = ExitStatus::not_started(err);
  outcome_.start_error = std::move(why);
}

// Opens what the child's stdout or stderr should be; returns the fd to hand to the child
// (owned by `to_close` when we opened it) and creates the relay for kRelay.
int WorkerProcess::open_sink(const StreamRoute& route, int console_fd, std::vector<int>& to_close) {
  switch (route.sink) {
    case StreamSink::kInherit:
      return console_fd;
    case StreamSink::kDiscard: {
      const int fd = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
      if (fd >= 0) to_close.push_back(fd);
      return fd;
    }
    case StreamSink::kFile: {
      const int fd = open_log_file(route);
      if (fd >= 0) to_close.push_back(fd);
      return fd;
    }
    case StreamSink::kRelay: {
      const int file_fd = route.file.empty() ? -1 : open_log_file(route);
      if (!route.file.empty() && file_fd < 0) return -1;
      int fds[2];
      if (::pipe2(fds, O_CLOEXEC) != 0) {
        const int err = errno;  // reported by the caller; close() must not overwrite it
        if (file_fd >= 0) ::close(file_fd);
        errno = err;
        return -1;
      }
      to_close.push_back(fds[1]);
      ConsoleStream* console = nullptr;
      if (route.to_console) console = console_fd == STDOUT_FILENO ? &console_out() : &console_err();
      std::unique_ptr<DuplicateLines> copies;
      if (!route.filters.empty()) {
        // Always with the rank's prefix: the file mixes the ranks' lines.
        copies = std::make_unique<DuplicateLines>(route.filtered_file, route.filters,
                                                  spec_.console_prefix);
        if (!copies->is_open()) {
          spdlog::warn("cannot open {}: {}; the lines it would copy stay in the other logs",
                       route.filtered_file, std::strerror(errno));
          copies.reset();
        }
      }
      relays_.push_back(std::make_shared<OutputRelay>(
          io_, fds[0], file_fd, route.file, console,
          route.prefixed ? spec_.console_prefix : std::string(), std::move(copies)));
      if (route.keep_tail) {
        relays_.back()->keep_tail(kStderrTailBytes);
        tail_relay_ = relays_.back();
      }
      return fds[1];
    }
  }
  return -1;
}

// The child's stdin: the agent's own, a pipe the agent feeds from the terminal, or /dev/null
// (opened here, close-on-exec, rather than by Boost.Process without the flag). -1: none could
// be opened, errno says why.
int WorkerProcess::open_stdin(std::vector<int>& to_close) {
  TerminalInput* input = current_terminal_input();
  const auto source =
      spec_.reads_stdin && input != nullptr ? input->source() : TerminalInput::Source::kNothing;
  if (source == TerminalInput::Source::kInherit) return STDIN_FILENO;
  if (source == TerminalInput::Source::kTerminal) {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) return -1;
    to_close.push_back(fds[0]);
    input->attach(fds[1]);
    return fds[0];
  }
  const int fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (fd >= 0) to_close.push_back(fd);
  return fd;
}

namespace {

// Where the child runs, made before fork: between fork and exec it may only use it.
struct Placement {
  cpu_set_t cpus;
  MemoryMask memory{};
  bool pinned = false;       // to `cpus`
  bool prefer_node = false;  // memory from the one node in `memory`
};

Placement placement_of(const WorkerSpec& spec) {
  Placement p;
  CPU_ZERO(&p.cpus);
  for (int cpu : spec.cpus)
    if (cpu >= 0 && cpu < CPU_SETSIZE) CPU_SET(cpu, &p.cpus);
  p.pinned = !spec.cpus.empty();
  p.prefer_node = spec.numa_node >= 0 && spec.numa_node < static_cast<int>(kMemoryMaskBits);
  if (p.prefer_node) {
    const auto bits = 8 * sizeof(unsigned long);
    p.memory[static_cast<size_t>(spec.numa_node) / bits] |=
        1UL << (static_cast<size_t>(spec.numa_node) % bits);
  }
  return p;
}

}  // namespace

bool WorkerProcess::open_stdio(Stdio& stdio) {
  if (!spec_.log_dir.empty()) {
    // torch's @record writes TORCHELASTIC_ERROR_FILE but does not create its directory.
    std::error_code ec;
    std::filesystem::create_directories(spec_.log_dir, ec);
    if (ec)
      return cannot_start(ec.value(),
                          fmt::format("cannot create {}: {}", spec_.log_dir, ec.message()));
  }
  stdio.out = open_sink(spec_.out, STDOUT_FILENO, stdio.to_close);
  stdio.err = stdio.out < 0 ? -1 : open_sink(spec_.err, STDERR_FILENO, stdio.to_close);
  const bool output = stdio.out >= 0 && stdio.err >= 0;
  stdio.in = output ? open_stdin(stdio.to_close) : -1;
  if (stdio.in >= 0) return true;
  const int err = errno;
  for (int fd : stdio.to_close) ::close(fd);
  relays_.clear();
  return cannot_start(err, output ? fmt::format("cannot open its stdin: {}", std::strerror(err))
                                  : fmt::format("cannot open its output in {}: {}", spec_.log_dir,
                                                std::strerror(err)));
}

bool WorkerProcess::spawn(boost::asio::io_context& spawn_context, Guardian* guardian) {
  Stdio stdio;
  if (!open_stdio(stdio)) return false;
  bp::error_code ec;
  bp::posix::fork_and_forget_launcher launcher;
  // The launcher's env pointer is set directly: Boost 1.81's process_environment is not
  // usable header-only (its on_setup is never compiled in).
  // The agent's mark, which the worker's descendants inherit: how escaped ones are found.
  EnvMap marked_env = spec_.env;
  marked_env[std::string(kAgentMarkVariable)] = agent_mark();
  const EnvBlock env(marked_env);
  launcher.env = env.envp();
  exec_report_ = std::make_unique<ExecReport>();
  const Placement placement = placement_of(spec_);
  std::optional<bp::process> proc;
  {
    const AllSignalsBlocked blocked;
    proc.emplace(launcher(
        spawn_context.get_executor(), ec, std::filesystem::path(spec_.program), spec_.argv,
        bp::process_stdio{stdio.in, stdio.out, stdio.err},
        WorkerProcessSetup{::getpid(), guardian != nullptr ? guardian->registration_fd() : -1,
                           placement.pinned ? &placement.cpus : nullptr,
                           placement.prefer_node ? placement.memory.data() : nullptr,
                           kernel_features().close_range_cloexec},
        *exec_report_));
  }
  exec_report_->forked();
  // The child has its copies; pipes see EOF when it ends.
  for (int fd : stdio.to_close) ::close(fd);
  if (ec) {  // no child: the pipes or the fork failed
    relays_.clear();
    exec_report_.reset();
    return cannot_start(ec.value(),
                        fmt::format("cannot start {}: {}", spec_.program, ec.message()));
  }
  started(proc->id());
  // Boost's handle is not kept: the child is reaped by ChildExits, pidfd or SIGCHLD.
  proc->detach();
  return true;
}

void WorkerProcess::started(pid_t pid) {
  outcome_.pid = pid;
  // The child makes its own process group, but this launcher does not wait for it: a stop
  // signalled to the group before the child got there would find none and be lost. Made from
  // both sides, as shells do; the second call fails harmlessly (EACCES once it has exec'd).
  (void)::setpgid(outcome_.pid, outcome_.pid);
  running_ = true;
  for (auto& relay : relays_) relay->start();
  spdlog::debug("started local rank {} (rank {}, device {}) as pid {}", spec_.local_rank,
                spec_.global_rank, spec_.device_id, outcome_.pid);
}

void WorkerProcess::ended(boost::system::error_code ec, int wait_status, bool stopped_by_agent,
                          Guardian* guardian) {
  running_ = false;
  if (const auto exec_error = exec_report_->exec_error()) {
    cannot_start(*exec_error,
                 fmt::format("cannot execute {}: {}", spec_.program, std::strerror(*exec_error)));
  } else if (ec) {
    spdlog::error("lost track of local rank {} (pid {}): {}", spec_.local_rank, outcome_.pid,
                  ec.message());
    outcome_.status = ExitStatus::exited(1);
  } else {
    outcome_.status = ExitStatus::from_wait_status(wait_status);
  }
  outcome_.finished_at = std::chrono::system_clock::now();
  // A broken pipe or a crash while the group was being stopped is the worker's own end.
  outcome_.stopped_by_agent = stopped_by_agent && !outcome_.status.self_inflicted();
  // Whatever the worker left running in its group goes with it. Done now, while the group
  // id cannot have been reused: pid_max may be as low as 32768.
  signal_process_group(outcome_.pid, SIGKILL);
  if (guardian != nullptr) guardian->forget(outcome_.pid);
  spdlog::debug("local rank {} (pid {}) ended: {}", spec_.local_rank, outcome_.pid,
                outcome_.status.describe());
}

void WorkerProcess::abandon() {
  running_ = false;
  outcome_.survived_kill = true;
  outcome_.stopped_by_agent = true;
}

void WorkerProcess::signal(int sig) const {
  if (running_) signal_process_group(outcome_.pid, sig);
}

void WorkerProcess::settle(std::function<void()> settled) {
  // Once every relay has closed (a read in flight may still hold the last bytes).
  auto left = std::make_shared<size_t>(relays_.size() + 1);
  auto one_closed = [this, left, settled = std::move(settled)] {
    if (--*left > 0) return;
    read_what_it_left();
    settled();
  };
  for (auto& relay : relays_) relay->drain_and_close(one_closed);
  one_closed();
}

void WorkerProcess::read_what_it_left() {
  // Which of its log files lost output: a relay knows its failed write; a file the worker
  // wrote itself is suspect when its file system is full now.
  outcome_.incomplete_logs.clear();
  for (const StreamRoute* route : {&spec_.out, &spec_.err}) {
    if (route->file.empty()) continue;
    std::optional<std::string> why;
    for (const auto& relay : relays_) {
      if (relay->file_path() == route->file && relay->write_error() != 0)
        why = errno_label(relay->write_error());
    }
    if (!why && route->sink == StreamSink::kFile) {
      if (auto full = full_file_system(route->file)) why = "may be incomplete: " + *full;
    }
    if (why) outcome_.incomplete_logs.push_back(fmt::format("{} ({})", route->file, *why));
  }
  outcome_.raised_at = error_file_time(outcome_.error_file);
  read_stack_dump();
}

// A faulthandler dump in what the worker wrote last to its stderr, and for a failed worker
// that tail itself (its traceback): a relay holds the stream's tail, a file sink is read back.
void WorkerProcess::read_stack_dump() {
  const StreamRoute& route = spec_.err;
  if (!route.keep_tail) return;
  const std::string tail = tail_relay_ ? tail_relay_->tail()
                           : route.sink == StreamSink::kFile
                               ? file_tail(route.file, kStderrTailBytes)
                               : std::string();
  outcome_.stack_frames = python_dump_top_frames(tail, kTopFrames);
  if (!outcome_.status.success()) outcome_.stderr_tail = tail;
}

}  // namespace npu_run
