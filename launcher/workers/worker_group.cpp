#include "workers/worker_group.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <sys/prctl.h>

#include <algorithm>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
#include <cerrno>
#include <csignal>

#include "workers/child_exits.hpp"
#include "workers/escaped_processes.hpp"
#include "workers/guardian.hpp"
#include "workers/worker_process.hpp"

namespace npu_run {

namespace asio = boost::asio;
using Clock = std::chrono::steady_clock;

struct WorkerGroup::Impl : std::enable_shared_from_this<Impl> {
  enum class Phase { kIdle, kRunning, kStopping, kKilling, kDone };

  Impl(asio::io_context& io_context, std::vector<WorkerSpec> specs, StopPolicy stop_policy,
       Guardian* g)
      : io(io_context), policy(stop_policy), guardian(g), exits(io_context), timer(io_context) {
    workers.reserve(specs.size());
    for (WorkerSpec& spec : specs)
      workers.push_back(std::make_unique<WorkerProcess>(io_context, std::move(spec)));
  }

  void start(DoneHandler handler) {
    on_done = std::move(handler);
    phase = Phase::kRunning;
    started = Clock::now();
    for (size_t i = 0; i < workers.size(); ++i) {
      if (!workers[i]->spawn(spawn_context, guardian)) {
        root_cause = i;
        // The others never start: they would only be stopped again.
        for (size_t j = i + 1; j < workers.size(); ++j) {
          workers[j]->not_started(
              ECANCELED, fmt::format("not started because local rank {} could not start", i));
        }
        begin_stop(SIGTERM);
        break;
      }
      ++alive;
      exits.watch(workers[i]->pid(),
                  [self = shared_from_this(), i](boost::system::error_code ec, int wait_status) {
                    self->on_exit(i, ec, wait_status);
                  });
    }
    if (alive == 0) finish();
  }

  void on_exit(size_t index, boost::system::error_code ec, int wait_status) {
    WorkerProcess& w = *workers[index];
    if (!w.running()) return;  // given up on after SIGKILL; this is the cancelled wait
    --alive;
    w.ended(ec, wait_status, phase == Phase::kStopping || phase == Phase::kKilling, guardian);
    if (on_each_exit) on_each_exit(w.spec().local_rank, w.outcome().status.success());
    if (phase == Phase::kRunning && !w.outcome().status.success()) {
      root_cause = index;
      if (w.spec().local_rank < 0) {
        // A group of its own (agent/core/scheduler_workers.hpp), which says what it stops next.
        spdlog::error("MindSpore's scheduler (pid {}) failed with {}", w.pid(),
                      w.outcome().status.describe());
      } else {
        spdlog::error(
            "local rank {} (rank {}, pid {}) failed with {}; stopping the other {} worker{}",
            w.spec().local_rank, w.spec().global_rank, w.pid(), w.outcome().status.describe(),
            alive, alive == 1 ? "" : "s");
      }
      begin_stop(SIGTERM);
    }
    if (alive == 0) finish();
  }

  void begin_stop(int sig) {
    phase = Phase::kStopping;
    stop_sent = sig;
    stop_time = Clock::now();
    for (const auto& w : workers) w->signal(sig);
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
    for (const auto& w : workers) {
      if (!w->running()) continue;
      pids.push_back(w->pid());
      w->signal(SIGKILL);
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
    for (const auto& w : workers) {
      if (!w->running()) continue;
      spdlog::error(
          "local rank {} (pid {}) did not exit {:.1f} s after SIGKILL; it is probably in "
          "uninterruptible sleep (state D in ps). npu_run stops waiting for it.",
          w->spec().local_rank, w->pid(),
          std::chrono::duration<double>(policy.kill_timeout).count());
      w->abandon();
      --alive;
      exits.forget(w->pid());
    }
    finish();
  }

  Clock::time_point stop_started() const { return stop_time; }

  void finish() {
    if (phase == Phase::kDone) return;
    phase = Phase::kDone;
    timer.cancel();
    // The result is made once every worker's output has been read to the end.
    auto left = std::make_shared<size_t>(workers.size() + 1);
    auto settled = [self = shared_from_this(), left] {
      if (--*left == 0) self->report();
    };
    for (const auto& w : workers) w->settle(settled);
    settled();
  }

  void report() {
    GroupResult result;
    for (const auto& w : workers) result.workers.push_back(w->outcome());
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
    sweep_escaped();
    warn_incomplete_logs(result);
    // Posted so that start() never calls back into the agent before returning.
    asio::post(io, [handler = std::move(on_done), result = std::move(result)]() mutable {
      handler(std::move(result));
    });
  }

  // Said for every attempt, failed or not: a job that succeeded on a full disk has logs that
  // lost lines.
  static void warn_incomplete_logs(const GroupResult& result) {
    std::vector<std::string> logs;
    for (const WorkerOutcome& w : result.workers)
      logs.insert(logs.end(), w.incomplete_logs.begin(), w.incomplete_logs.end());
    if (logs.empty()) return;
    spdlog::warn(
        "{} log file{} of this attempt lost output: {}; free space there or choose "
        "another --log-dir",
        logs.size(), logs.size() == 1 ? "" : "s", fmt::join(logs, "; "));
  }

  // Processes that left a worker's process group go with the attempt, never with a later one.
  // The mark is the process's, not the group's: this assumes one group at a time per process,
  // as the agent runs them (a test running two groups at once in one process would see the
  // first one's end stop the second one's workers).
  void sweep_escaped() const {
    if (!policy.sweep_escaped) return;
    std::vector<pid_t> spare;
    if (guardian != nullptr) spare.push_back(guardian->pid());
    for (const auto& w : workers) {
      if (w->outcome().survived_kill) spare.push_back(w->outcome().pid);
    }
    sweep_escaped_processes(spare);
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
  std::vector<std::unique_ptr<WorkerProcess>> workers;
  DoneHandler on_done;
  ExitHandler on_each_exit;
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
  for (const auto& w : impl_->workers) w->signal(sig);
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

void WorkerGroup::on_each_exit(ExitHandler handler) {
  impl_->on_each_exit = std::move(handler);
}

pid_t WorkerGroup::pid_of(int local_rank) const {
  for (const auto& w : impl_->workers) {
    if (w->spec().local_rank == local_rank) return w->pid();
  }
  return -1;
}

std::vector<pid_t> WorkerGroup::running_pids() const {
  std::vector<pid_t> pids;
  for (const auto& w : impl_->workers) {
    if (w->running()) pids.push_back(w->pid());
  }
  return pids;
}

void sweep_escaped_processes(const std::vector<pid_t>& spare) {
  EscapeSweep sweep;
  sweep.mark = agent_mark();
  int subreaper = 0;
  sweep.children_of_self = ::prctl(PR_GET_CHILD_SUBREAPER, &subreaper) == 0 && subreaper != 0;
  sweep.spare = spare;
  const auto escaped = stop_escaped_processes(sweep);
  if (escaped.empty()) return;
  const bool all_stopped = std::all_of(escaped.begin(), escaped.end(),
                                       [](const EscapedProcess& p) { return p.kill_error == 0; });
  if (all_stopped)
    spdlog::warn("stopped {}", describe_escaped(escaped));
  else
    spdlog::error("found {}", describe_escaped(escaped));
}

}  // namespace npu_run
