#include "workers/worker_group.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <filesystem>

#include "workers/boost_process.hpp"
#include "workers/child_exits.hpp"
#include "workers/exec_report.hpp"
#include "workers/guardian.hpp"
#include "workers/output_relay.hpp"

namespace npu_run {

namespace asio = boost::asio;
namespace bp = boost::process::v2;
using Clock = std::chrono::steady_clock;

namespace {

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

// Boost.Process initializer that runs in the child between fork and exec, so only
// async-signal-safe calls. On failure the launcher reports errno to the parent.
struct WorkerProcessSetup {
  pid_t agent_pid;
  int guardian_fd;  // -1: no guardian

  template <typename Launcher>
  bp::error_code on_exec_setup(Launcher&, const std::filesystem::path&, const char* const*) {
    // Own process group: the agent signals the worker and everything it starts as one, and a
    // terminal's Ctrl-C reaches only the agent, which then decides.
    if (::setpgid(0, 0) != 0) return bp::error_code(errno, boost::system::system_category());
    if (::prctl(PR_SET_PDEATHSIG, SIGKILL) != 0)
      return bp::error_code(errno, boost::system::system_category());
    // The agent may have died between fork and prctl; then no death signal would ever come.
    if (::getppid() != agent_pid) {
      errno = ESRCH;
      return bp::error_code(ESRCH, boost::system::system_category());
    }
    // Register with the guardian here, before exec, i.e. before user code can start children.
    if (guardian_fd >= 0) {
      const int32_t group = static_cast<int32_t>(::getpid());
      if (::write(guardian_fd, &group, sizeof(group)) != static_cast<ssize_t>(sizeof(group))) {
        return bp::error_code(errno, boost::system::system_category());
      }
    }
    // The agent forked with every signal blocked. Its handlers (Asio's, which write to the
    // agent's signal pipe) must not run here for a signal meant for this worker: back to the
    // defaults first, as posix_spawn does, then unblock. Exec would reset them too, but only
    // later. Ignored signals and the mask survive exec; SIGPIPE is ignored by the agent only.
    for (int sig = 1; sig < NSIG; ++sig) {
      struct sigaction current {};
      if (sig == SIGKILL || sig == SIGSTOP || ::sigaction(sig, nullptr, &current) != 0) continue;
      if (current.sa_handler != SIG_DFL && (current.sa_handler != SIG_IGN || sig == SIGPIPE))
        (void)::signal(sig, SIG_DFL);
    }
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    return {};
  }
};

// Blocks every signal of this thread for a scope: around fork, so that the child starts with
// none pending against the agent's handlers (WorkerProcessSetup resets them first).
class AllSignalsBlocked {
 public:
  AllSignalsBlocked() {
    sigset_t all;
    sigfillset(&all);
    ::pthread_sigmask(SIG_BLOCK, &all, &saved_);
  }
  ~AllSignalsBlocked() { ::pthread_sigmask(SIG_SETMASK, &saved_, nullptr); }
  AllSignalsBlocked(const AllSignalsBlocked&) = delete;
  AllSignalsBlocked& operator=(const AllSignalsBlocked&) = delete;

 private:
  sigset_t saved_{};
};

void signal_process_group(pid_t pgid, int sig) {
  // ESRCH only means the group is already gone.
  if (pgid > 0) ::kill(-pgid, sig);
}

}  // namespace

struct WorkerGroup::Impl : std::enable_shared_from_this<Impl> {
  enum class Phase { kIdle, kRunning, kStopping, kKilling, kDone };

  struct Worker {
    WorkerSpec spec;
    std::unique_ptr<ExecReport> exec_report;  // whether it reached exec, read once it exits
    std::vector<std::shared_ptr<OutputRelay>> relays;
    WorkerOutcome outcome;
    bool running = false;
  };

  Impl(asio::io_context& io_context, std::vector<WorkerSpec> specs, StopPolicy stop_policy,
       Guardian* g)
      : io(io_context), policy(stop_policy), guardian(g), exits(io_context), timer(io_context) {
    workers.reserve(specs.size());
    for (WorkerSpec& spec : specs) {
      Worker& w = workers.emplace_back();
      w.outcome.local_rank = spec.local_rank;
      w.outcome.global_rank = spec.global_rank;
      w.outcome.stderr_log = spec.err.file;
      w.outcome.error_file = spec.error_file;
      w.spec = std::move(spec);
    }
  }

  ~Impl() {
    // Only reached with workers running if the agent is torn down abnormally (an exception);
    // never leave them behind.
    for (Worker& w : workers) {
      if (w.running) signal_process_group(w.outcome.pid, SIGKILL);
    }
  }

  void start(DoneHandler handler) {
    on_done = std::move(handler);
    phase = Phase::kRunning;
    started = Clock::now();
    for (size_t i = 0; i < workers.size(); ++i) {
      if (!spawn(i)) {
        root_cause = i;
        // The others never start: they would only be stopped again.
        for (size_t j = i + 1; j < workers.size(); ++j) {
          workers[j].outcome.status = ExitStatus::not_started(ECANCELED);
          workers[j].outcome.start_error =
              fmt::format("not started because local rank {} could not start", i);
        }
        begin_stop(SIGTERM);
        break;
      }
    }
    if (alive == 0) finish();
  }

  // Opens what the child's stdout or stderr should be; returns the fd to hand to the child
  // (owned by `to_close` when we opened it) and creates the relay for kRelay.
  int open_sink(Worker& w, const StreamRoute& route, int console_fd, std::vector<int>& to_close) {
    switch (route.sink) {
      case StreamSink::kInherit:
        return console_fd;
      case StreamSink::kDiscard: {
        const int fd = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
        if (fd >= 0) to_close.push_back(fd);
        return fd;
      }
      case StreamSink::kFile: {
        const int fd = open_log_file(route.file);
        if (fd >= 0) to_close.push_back(fd);
        return fd;
      }
      case StreamSink::kRelay: {
        const int file_fd = route.file.empty() ? -1 : open_log_file(route.file);
        if (!route.file.empty() && file_fd < 0) return -1;
        int fds[2];
        if (::pipe2(fds, O_CLOEXEC) != 0) {
          const int err = errno;  // reported by the caller; close() must not overwrite it
          if (file_fd >= 0) ::close(file_fd);
          errno = err;
          return -1;
        }
        to_close.push_back(fds[1]);
        w.relays.push_back(
            std::make_shared<OutputRelay>(io, fds[0], file_fd, console_fd, w.spec.console_prefix));
        return fds[1];
      }
    }
    return -1;
  }

  // The file's directory is the worker's log_dir, which spawn() has created.
  static int open_log_file(const std::string& path) {
    return ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  }

  bool spawn(size_t index) {
    Worker& w = workers[index];
    if (!w.spec.log_dir.empty()) {
      // torch's @record writes TORCHELASTIC_ERROR_FILE but does not create its directory.
      std::error_code ec;
      std::filesystem::create_directories(w.spec.log_dir, ec);
      if (ec) {
        w.outcome.status = ExitStatus::not_started(ec.value());
        w.outcome.start_error = fmt::format("cannot create {}: {}", w.spec.log_dir, ec.message());
        spdlog::error("cannot start local rank {}: {}", w.spec.local_rank, w.outcome.start_error);
        return false;
      }
    }
    std::vector<int> to_close;
    const int out_fd = open_sink(w, w.spec.out, STDOUT_FILENO, to_close);
    const int err_fd = out_fd < 0 ? -1 : open_sink(w, w.spec.err, STDERR_FILENO, to_close);
    if (out_fd < 0 || err_fd < 0) {
      const int err = errno;
      for (int fd : to_close) ::close(fd);
      w.relays.clear();
      w.outcome.status = ExitStatus::not_started(err);
      w.outcome.start_error =
          fmt::format("cannot open its output in {}: {}", w.spec.log_dir, std::strerror(err));
      spdlog::error("cannot start local rank {}: {}", w.spec.local_rank, w.outcome.start_error);
      return false;
    }

    bp::error_code ec;
    // Does not wait for the exec: its outcome is read from `exec_report` when the worker exits.
    bp::posix::fork_and_forget_launcher launcher;
    // The launcher's env pointer is set directly: Boost 1.81's process_environment is not
    // usable header-only (its on_setup is never compiled in).
    const std::vector<std::string> env_strings = to_envp(w.spec.env);
    std::vector<const char*> envp;
    envp.reserve(env_strings.size() + 1);
    for (const std::string& kv : env_strings) envp.push_back(kv.c_str());
    envp.push_back(nullptr);
    launcher.env = envp.data();
    w.exec_report = std::make_unique<ExecReport>();
    std::optional<bp::process> proc;
    {
      const AllSignalsBlocked blocked;
      proc.emplace(launcher(
          spawn_context.get_executor(), ec, std::filesystem::path(w.spec.program), w.spec.argv,
          bp::process_stdio{nullptr, out_fd, err_fd},
          WorkerProcessSetup{::getpid(), guardian != nullptr ? guardian->registration_fd() : -1},
          *w.exec_report));
    }
    w.exec_report->forked();
    for (int fd : to_close) ::close(fd);  // the child has its copies; pipes see EOF when it ends
    if (ec) {                             // no child: the pipes or the fork failed
      w.relays.clear();
      w.exec_report.reset();
      w.outcome.status = ExitStatus::not_started(ec.value());
      w.outcome.start_error = fmt::format("cannot start {}: {}", w.spec.program, ec.message());
      spdlog::error("cannot start local rank {}: {}", w.spec.local_rank, w.outcome.start_error);
      return false;
    }

    // Boost's handle is not kept: the child is reaped by `exits`, pidfd or SIGCHLD.
    w.outcome.pid = proc->id();
    proc->detach();
    // The child makes its own process group, but this launcher does not wait for it: a stop
    // signalled to the group before the child got there would find none and be lost. Made from
    // both sides, as shells do; the second call fails harmlessly (EACCES once it has exec'd).
    (void)::setpgid(w.outcome.pid, w.outcome.pid);
    w.running = true;
    ++alive;
    for (auto& relay : w.relays) relay->start();
    exits.watch(w.outcome.pid,
                [self = shared_from_this(), index](bp::error_code wait_ec, int wait_status) {
                  self->on_exit(index, wait_ec, wait_status);
                });
    spdlog::debug("started local rank {} (rank {}, device {}) as pid {}", w.spec.local_rank,
                  w.spec.global_rank, w.spec.device_id, w.outcome.pid);
    return true;
  }

  void on_exit(size_t index, bp::error_code ec, int wait_status) {
    Worker& w = workers[index];
    if (!w.running) return;  // given up on after SIGKILL; this is the cancelled wait
    w.running = false;
    --alive;
    if (const auto exec_error = w.exec_report->exec_error()) {
      w.outcome.status = ExitStatus::not_started(*exec_error);
      w.outcome.start_error =
          fmt::format("cannot execute {}: {}", w.spec.program, std::strerror(*exec_error));
      spdlog::error("cannot start local rank {}: {}", w.spec.local_rank, w.outcome.start_error);
    } else if (ec) {
      spdlog::error("lost track of local rank {} (pid {}): {}", w.spec.local_rank, w.outcome.pid,
                    ec.message());
      w.outcome.status = ExitStatus::exited(1);
    } else {
      w.outcome.status = ExitStatus::from_wait_status(wait_status);
    }
    w.outcome.finished_at = std::chrono::system_clock::now();
    w.outcome.stopped_by_agent = phase == Phase::kStopping || phase == Phase::kKilling;
    // Whatever the worker left running in its group goes with it. Done now, while the group
    // id cannot have been reused: pid_max may be as low as 32768.
    signal_process_group(w.outcome.pid, SIGKILL);
    if (guardian != nullptr) guardian->forget(w.outcome.pid);

    spdlog::debug("local rank {} (pid {}) ended: {}", w.spec.local_rank, w.outcome.pid,
                  w.outcome.status.describe());
    if (phase == Phase::kRunning && !w.outcome.status.success()) {
      root_cause = index;
      spdlog::error(
          "local rank {} (rank {}, pid {}) failed with {}; stopping the other {} worker{}",
          w.spec.local_rank, w.spec.global_rank, w.outcome.pid, w.outcome.status.describe(), alive,
          alive == 1 ? "" : "s");
      begin_stop(SIGTERM);
    }
    if (alive == 0) finish();
  }

  void begin_stop(int sig) {
    phase = Phase::kStopping;
    stop_sent = sig;
    stop_time = Clock::now();
    for (Worker& w : workers) {
      if (w.running) signal_process_group(w.outcome.pid, sig);
    }
    if (alive == 0) return;
    if (policy.term_timeout.count() == 0) {
      escalate();
      return;
    }
    timer.expires_after(policy.term_timeout);
    timer.async_wait([self = shared_from_this()](const boost::system::error_code& ec) {
      if (!ec && self->phase == Phase::kStopping) self->escalate();
    });
  }

  void escalate() {
    phase = Phase::kKilling;
    std::vector<pid_t> pids;
    for (Worker& w : workers) {
      if (!w.running) continue;
      pids.push_back(w.outcome.pid);
      signal_process_group(w.outcome.pid, SIGKILL);
    }
    if (pids.empty()) return;
    spdlog::warn("sent SIGKILL to {} worker{} still running {:.1f} s after {} (pids {})",
                 pids.size(), pids.size() == 1 ? "" : "s",
                 std::chrono::duration<double>(Clock::now() - stop_started()).count(),
                 signal_name(stop_sent), fmt::join(pids, ", "));
    timer.expires_after(policy.kill_timeout);
    timer.async_wait([self = shared_from_this()](const boost::system::error_code& ec) {
      if (!ec) self->give_up();
    });
  }

  // Last resort for processes SIGKILL cannot end (uninterruptible sleep, e.g. a hung device
  // driver or NFS): report them and stop waiting, rather than hang the job forever.
  void give_up() {
    for (Worker& w : workers) {
      if (!w.running) continue;
      spdlog::error(
          "local rank {} (pid {}) did not exit {:.1f} s after SIGKILL; it is probably in "
          "uninterruptible "
          "sleep (state D in ps). npu_run stops waiting for it.",
          w.spec.local_rank, w.outcome.pid,
          std::chrono::duration<double>(policy.kill_timeout).count());
      w.running = false;
      w.outcome.survived_kill = true;
      w.outcome.stopped_by_agent = true;
      --alive;
      exits.forget(w.outcome.pid);
    }
    finish();
  }

  Clock::time_point stop_started() const { return stop_time; }

  void finish() {
    if (phase == Phase::kDone) return;
    phase = Phase::kDone;
    timer.cancel();
    GroupResult result;
    for (Worker& w : workers) {
      for (auto& relay : w.relays) relay->drain_and_close();
      w.outcome.raised_at = error_file_time(w.outcome.error_file);
      result.workers.push_back(w.outcome);
    }
    result.first_exit = root_cause;
    result.root_cause = choose_root_cause(result.workers, root_cause);
    result.stop_signal = requested_stop;
    // A group stopped from outside stays "stopped" even if one of its workers had raised: the
    // agent decides whether that error predates the outside failure.
    result.outcome = result.first_exit     ? GroupResult::Outcome::kFailed
                     : requested_stop != 0 ? GroupResult::Outcome::kStopped
                     : result.root_cause   ? GroupResult::Outcome::kFailed
                                           : GroupResult::Outcome::kSucceeded;
    result.elapsed = Clock::now() - started;
    // Posted so that start() never calls back into the agent before returning.
    asio::post(io, [handler = std::move(on_done), result = std::move(result)]() mutable {
      handler(std::move(result));
    });
  }

  asio::io_context& io;
  // Handed to Boost's launcher instead of `io`, and never run: the launcher tells its context
  // about each fork, and a forked child would otherwise rebuild the agent's whole epoll set
  // (one epoll_ctl per relay pipe, pidfd and socket) just before exec, O(workers) per spawn.
  asio::io_context spawn_context;
  StopPolicy policy;
  Guardian* guardian;
  ChildExits exits;
  asio::steady_timer timer;
  std::vector<Worker> workers;
  DoneHandler on_done;
  Phase phase = Phase::kIdle;
  size_t alive = 0;
  std::optional<size_t> root_cause;
  int requested_stop = 0;  // signal of an outside stop request (0: none)
  int stop_sent = SIGTERM;
  Clock::time_point started;
  Clock::time_point stop_time;
};

WorkerGroup::WorkerGroup(asio::io_context& io, std::vector<WorkerSpec> specs, StopPolicy policy,
                         Guardian* guardian)
    : impl_(std::make_shared<Impl>(io, std::move(specs), policy, guardian)) {}

WorkerGroup::~WorkerGroup() = default;

void WorkerGroup::start(DoneHandler on_done) {
  impl_->start(std::move(on_done));
}

void WorkerGroup::forward_signal(int sig) {
  for (const auto& w : impl_->workers) {
    if (w.running) signal_process_group(w.outcome.pid, sig);
  }
}

void WorkerGroup::stop(int sig) {
  using Phase = Impl::Phase;
  switch (impl_->phase) {
    case Phase::kRunning:
      impl_->requested_stop = sig;
      impl_->begin_stop(sig);
      if (impl_->alive == 0) impl_->finish();
      break;
    case Phase::kStopping:
      if (impl_->requested_stop == 0) {
        // Already stopping after a worker failed: this is the first outside request, so pass
        // the signal on and let the grace period run; only a repeated request skips it.
        impl_->requested_stop = sig;
        forward_signal(sig);
      } else {
        impl_->escalate();
      }
      break;
    default:
      break;
  }
}

std::vector<pid_t> WorkerGroup::running_pids() const {
  std::vector<pid_t> pids;
  for (const auto& w : impl_->workers) {
    if (w.running) pids.push_back(w.outcome.pid);
  }
  return pids;
}

}  // namespace npu_run
