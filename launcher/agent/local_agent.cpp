#include "agent/local_agent.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/signal_set.hpp>
#include <boost/asio/steady_timer.hpp>
#include <csignal>
#include <fstream>
#include <map>

#include "agent/agent_log.hpp"
#include "agent/failure_summary.hpp"
#include "agent/hang_stacks.hpp"
#include "agent/hang_watch.hpp"
#include "agent/job_checks.hpp"
#include "agent/parent_watch.hpp"
#include "agent/rank_beats.hpp"
#include "agent/status_service.hpp"
#include "agent/worker_env.hpp"
#include "agent/worker_plan.hpp"
#include "ascend/topology.hpp"
#include "basics/exit_status.hpp"
#include "basics/usage_error.hpp"
#include "net/host_address.hpp"
#include "rendezvous/describe.hpp"
#include "rendezvous/protocol.hpp"
#include "workers/progress_beats.hpp"
#include "workers/stack_dump.hpp"

namespace npu_run {

namespace asio = boost::asio;
using Clock = std::chrono::steady_clock;

namespace {

// Progress of a forming round is logged no more often than this.
constexpr std::chrono::seconds kProgressLogInterval{10};

std::string describe_progress(const rdzv::Progress& p) {
  if (!p.missing_node_ranks.empty()) {
    return fmt::format("joined {}/{}, waiting for node ranks {}", p.joined, p.expected,
                       fmt::join(p.missing_node_ranks, ", "));
  }
  const int missing = p.expected - p.joined;
  return fmt::format("joined {}/{}, waiting for {} more node{}", p.joined, p.expected, missing,
                     missing == 1 ? "" : "s");
}

}  // namespace

struct LocalAgent::Impl {
  Impl(asio::io_context& io_context, const LaunchConfig& config, Rendezvous& rdzv,
       AgentContext context, Guardian* g)
      : io(io_context),
        cfg(config),
        rendezvous(rdzv),
        ctx(std::move(context)),
        guardian(g),
        signals(io_context),
        parent_watch(io_context),
        dump_timer(io_context) {
    for (int sig : handled_signals()) signals.add(sig);
    if (!ctx.make_workers) ctx.make_workers = worker_groups(io, guardian);
    open_progress_sockets();
    if (beats) {
      status = std::make_unique<StatusService>(
          io, rendezvous, *beats, [this]() -> std::optional<StatusService::Seat> {
            if (state != State::kRunning && state != State::kReporting) return std::nullopt;
            return StatusService::Seat{assignment.node_rank, assignment.host};
          });
    }
  }

  // NPU_RUN_PROGRESS for every worker. Without --hang-timeout or --exit-timeout a failure here
  // only costs the beats; with them, the job cannot do what was asked, so it does not start.
  void open_progress_sockets() {
    try {
      beats = std::make_unique<ProgressBeats>(io, cfg.shape.nproc_per_node);
    } catch (const std::exception& e) {
      if (cfg.supervision.hang.any())
        throw std::runtime_error(fmt::format("--hang-timeout/--exit-timeout: {}", e.what()));
      spdlog::warn("{}; workers get no NPU_RUN_PROGRESS", e.what());
    }
  }

  // The stop signals of --signals-to-handle, plus SIGUSR1/SIGUSR2 to forward (Slurm's
  // --signal=USR1@60 warning) unless the user made them stop signals.
  std::vector<int> handled_signals() const {
    std::vector<int> all = cfg.supervision.stop_signals;
    for (int sig : {SIGUSR1, SIGUSR2}) {
      if (std::find(all.begin(), all.end(), sig) == all.end()) all.push_back(sig);
    }
    return all;
  }

  bool is_stop_signal(int sig) const {
    return std::find(cfg.supervision.stop_signals.begin(), cfg.supervision.stop_signals.end(),
                     sig) != cfg.supervision.stop_signals.end();
  }

  void start(FinishedHandler handler) {
    on_finished = std::move(handler);
    wait_for_signal();
    if (cfg.supervision.stop_with_parent) watch_parent();
    state = State::kRendezvous;
    rendezvous.start(Rendezvous::Handlers{
        [this](const Assignment& a) { on_assigned(a); },
        [this](const rdzv::FailureReport& root) { on_stop_workers(root); },
        [this](const rdzv::Reform& r) { on_reform(r); },
        [this](const rdzv::Decision& d) { on_decided(d); },
        [this](const rdzv::Progress& p) { on_progress(p); },
        [this](const std::string& why) { on_rendezvous_failed(why); },
        [this] { return status ? status->changed_beats() : std::nullopt; },
    });
    rendezvous.join();
  }

  void wait_for_signal() {
    signals.async_wait([this](const boost::system::error_code& ec, int sig) {
      if (ec) return;  // cancelled at the end of the job
      on_signal(sig);
      wait_for_signal();
    });
  }

  void watch_parent() {
    parent_watch.start([this] {
      stop_job(SIGTERM,
               fmt::format("{} (pid {}), which started npu_run, exited without stopping it",
                           parent_watch.parent_name(), parent_watch.parent()));
    });
    spdlog::debug("watching the parent {} (pid {}) through {}", parent_watch.parent_name(),
                  parent_watch.parent(), to_string(parent_watch.mechanism()));
  }

  void on_signal(int sig) {
    if (!is_stop_signal(sig)) {
      const auto pids = group ? group->running_pids() : std::vector<pid_t>{};
      spdlog::info("received {}: forwarded to {} worker process group{}", signal_name(sig),
                   pids.size(), pids.size() == 1 ? "" : "s");
      if (group) group->forward_signal(sig);
      return;
    }
    stop_job(sig, "received " + signal_name(sig));
  }

  // Stops this node's part of the job as the stop signal `sig` does (`why` says what happened);
  // a second call escalates to SIGKILL.
  void stop_job(int sig, const std::string& why) {
    if (state == State::kDone) return;
    if (state != State::kRunning) {
      // No workers are running: leave the job at once.
      spdlog::warn("{} while {}: leaving the job", why,
                   state == State::kReporting ? "waiting for the job's decision"
                                              : "waiting for the rendezvous");
      interrupted_by = sig;
      finish(exit_for_signal(sig));
      return;
    }
    if (interrupted_by == 0) {
      interrupted_by = sig;
      spdlog::warn(
          "{}: stopping the workers (SIGKILL after {:.1f} s; send it again to kill at "
          "once)",
          why, std::chrono::duration<double>(cfg.supervision.term_timeout).count());
    } else {
      spdlog::warn("{} again: sending SIGKILL to the workers now", why);
    }
    group->stop(sig);
  }

  void on_progress(const rdzv::Progress& p) {
    const auto now = Clock::now();
    if (now - last_progress_log < kProgressLogInterval) return;
    last_progress_log = now;
    spdlog::info("rendezvous at {}: {}", rendezvous.describe(), describe_progress(p));
  }

  // This node cannot take part as asked (exit 2 on every node, no restart).
  void refuse_job(const std::string& why) {
    spdlog::error("{}", why);
    state = State::kReporting;
    last_result = GroupResult{};
    rdzv::FailureReport failure;
    failure.host = assignment.host;
    failure.node_rank = assignment.node_rank;
    failure.exit_code = kExitUsage;
    failure.description = why;
    rendezvous.report(rdzv::Report{assignment.round, rdzv::Outcome::kFailed, failure, 0, true});
  }

  void on_assigned(const Assignment& assigned) {
    if (state != State::kRendezvous) return;
    Assignment a = assigned;
    assignment = a;
    set_agent_log_identity(a.node_rank, a.host);
    if (const std::string problem = prepare_job(cfg, a, ctx.run_dir); !problem.empty()) {
      refuse_job(problem);
      return;
    }
    assignment = a;
    const AttemptLayout layout{ctx.run_dir, ctx.log_files, a.restart_count};
    std::vector<WorkerSpec> specs = make_worker_specs(cfg, a, layout, ctx.agent_env);
    add_progress_env(specs);
    if (a.restart_count == 0 && omp_threads_defaulted(cfg, ctx.agent_env)) {
      spdlog::info(
          "OMP_NUM_THREADS is unset: setting it to 1 for each of the {} workers (export it to "
          "choose)",
          cfg.shape.nproc_per_node);
    }
    spdlog::info(
        "starting {} worker{} (ranks {}-{} of {}, node {} of {}, attempt {}), workers' store at "
        "{}:{}{}",
        specs.size(), specs.size() == 1 ? "" : "s", a.rank_offset,
        a.rank_offset + cfg.shape.nproc_per_node - 1, a.world_size, a.node_rank, a.nnodes,
        a.restart_count, a.worker_master_addr, a.worker_master_port,
        cfg.rendezvous.worker_store == WorkerStore::kTiered && cfg.shape.multi_node()
            ? " (this node's proxy of node 0's store)"
        : cfg.rendezvous.worker_store == WorkerStore::kTorch ? " (hosted by worker rank 0)"
                                                             : "");
    state = State::kRunning;
    remote_root_cause.reset();
    reform.reset();
    rendezvous_failure.clear();
    group =
        ctx.make_workers(std::move(specs), StopPolicy{cfg.supervision.term_timeout, kKillTimeout});
    hung.reset();
    dumped_at.reset();
    if (beats) beats->new_attempt();
    if (cfg.supervision.hang.any() && beats) {
      hang_watch = std::make_unique<HangWatch>(io, *beats, cfg.supervision.hang,
                                               [this](const Hang& h) { on_hang(h); });
      group->on_each_exit(
          [this](int local_rank, bool success) { hang_watch->exited(local_rank, success); });
    }
    group->start([this](GroupResult result) { on_group_done(std::move(result)); });
    if (hang_watch) hang_watch->start();
  }

  void add_progress_env(std::vector<WorkerSpec>& specs) const {
    for (WorkerSpec& spec : specs) {
      const auto set = [&spec](const std::string& name, const std::string& value) {
        spec.env[name] = value;
        spec.contract_env[name] = value;
      };
      if (beats) set("NPU_RUN_PROGRESS", beats->path(spec.local_rank));
      // A hang's stack dump is SIGABRT, on which faulthandler prints every Python thread.
      if (cfg.supervision.hang.any() && ctx.agent_env.count("PYTHONFAULTHANDLER") == 0)
        set("PYTHONFAULTHANDLER", "1");
    }
  }

  // A worker hung: its stacks and everyone else's are dumped (SIGABRT; faulthandler prints
  // them to each worker's stderr, core files suppressed), then the group stops as for any
  // failure, and the hang is this node's root cause.
  void on_hang(const Hang& h) {
    if (state != State::kRunning || stopping() || hung) return;
    hung = h;
    const auto pids = group->running_pids();
    spdlog::error(
        "local rank {} (rank {}) hung: {}; dumping the stacks of the {} running worker{} "
        "(SIGABRT) and stopping them",
        h.local_rank, assignment.rank_offset + h.local_rank,
        describe(h, cfg.shape.nproc_per_node - 1), pids.size(), pids.size() == 1 ? "" : "s");
    if (assignment.nnodes == 1) {
      dump_stacks(pids);
      return;
    }
    // Every node dumps at one moment, the hang's time + kDumpDelay (see dump_at).
    const rdzv::FailureReport report = hang_report(h);
    rendezvous.notice_hang(rdzv::HangNotice{assignment.round, report});
    dump_at(report.time_ms, pids);
  }

  // Once one rank's process is gone, the ranks waiting on it in a collective raise and leave
  // where they were stuck; so no node dumps before the others were told: all of them send
  // SIGABRT at the hang's wall-clock time + kDumpDelay (a node that hears late, or whose
  // clock is off, dumps at once; never more than kDumpDelay from now).
  void dump_at(int64_t hang_time_ms, std::vector<pid_t> pids) {
    const int64_t now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                               std::chrono::system_clock::now().time_since_epoch())
                               .count();
    const auto wait = std::chrono::milliseconds(
        std::clamp<int64_t>(hang_time_ms + kDumpDelay.count() - now_ms, 0, kDumpDelay.count()));
    dump_timer.expires_after(wait);
    dump_timer.async_wait([this, pids = std::move(pids)](boost::system::error_code ec) {
      if (!ec && state == State::kRunning) dump_stacks(pids);
    });
  }

  // Python workers print their own stacks on SIGABRT (faulthandler); for the others the
  // kernel's view is all there is, logged before they are stopped.
  void dump_stacks(const std::vector<pid_t>& pids) {
    kernel_frames.clear();
    for (const pid_t pid : pids) {
      if (runs_python(pid)) continue;
      const std::string stacks = kernel_stacks(pid);
      if (!stacks.empty())
        spdlog::warn("worker pid {} is not Python; what the kernel shows of it:\n{}", pid, stacks);
      kernel_frames[pid] = kernel_top_frames(pid, rdzv::Limits::kMaxStackFrames);
    }
    disable_core_dumps(pids);
    dumped_at = std::chrono::steady_clock::now();
    group->stop(SIGABRT);
  }

  void log_beats() const {
    if (!beats || !spdlog::should_log(spdlog::level::debug)) return;
    for (int r = 0; r < beats->local_ranks(); ++r) {
      const RankProgress& p = beats->rank(r);
      spdlog::debug("local rank {}: {} progress beats in attempt {}{}", r, p.beats,
                    assignment.restart_count, p.beats > 0 ? ", the last '" + p.text + "'" : "");
    }
  }

  // Whether some worker beat past its best of the earlier attempts, by the last number in its
  // beat's text ("step 1200": a resumed job counts steps, not beats), else its beat count.
  bool progressed_this_attempt() {
    if (!beats) return true;
    best_progress.resize(static_cast<size_t>(beats->local_ranks()), -1);
    bool progressed = false;
    for (int r = 0; r < beats->local_ranks(); ++r) {
      const RankProgress& p = beats->rank(r);
      if (p.beats == 0) continue;
      const int64_t value = progress_value(p);
      int64_t& best = best_progress[static_cast<size_t>(r)];
      if (value > best) {
        progressed = true;
        best = value;
      }
    }
    return progressed;
  }

  // Every worker's last beat and how long before the stacks were dumped, for the summary:
  // where each rank got to. `at_dump`: rank_beats() as of the dump.
  void note_last_beats(GroupResult& result, const std::vector<rdzv::RankBeat>& at_dump) const {
    for (WorkerOutcome& w : result.workers) {
      // A worker that is not Python printed nothing: the kernel's view taken at the dump.
      if (const auto it = kernel_frames.find(w.pid);
          w.stack_frames.empty() && it != kernel_frames.end())
        w.stack_frames = it->second;
      if (w.local_rank < 0 || static_cast<size_t>(w.local_rank) >= at_dump.size()) continue;
      const rdzv::RankBeat& b = at_dump[static_cast<size_t>(w.local_rank)];
      w.last_beat = b.beats == 0 ? "none"
                                 : fmt::format("'{}', {:.1f} s before the stacks were dumped",
                                               b.text, static_cast<double>(b.age_ms) / 1000.0);
    }
  }

  // The group was stopped by npu_run for the hang: it failed, and the hung worker is its root
  // cause (what the summary shows first).
  void blame_hang(GroupResult& result) const {
    result.outcome = GroupResult::Outcome::kFailed;
    result.stop_signal = 0;
    for (size_t i = 0; i < result.workers.size(); ++i) {
      if (result.workers[i].local_rank != hung->local_rank) continue;
      result.root_cause = i;
      result.first_exit = i;
      result.workers[i].hang = describe(*hung, cfg.shape.nproc_per_node - 1);
    }
  }

  rdzv::FailureReport hang_report(const Hang& h) const {
    rdzv::FailureReport f;
    f.host = assignment.host;
    f.node_rank = assignment.node_rank;
    f.local_rank = h.local_rank;
    f.rank = assignment.rank_offset + h.local_rank;
    f.pid = group ? group->pid_of(h.local_rank) : -1;
    f.exit_code = kExitHang;
    f.hang = true;
    f.description = "hung: " + describe(h, cfg.shape.nproc_per_node - 1);
    f.time_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                    h.found_at.time_since_epoch())
                    .count();
    return f;
  }

  // Told to stop for another reason already, or stopping on a signal: the first reason stands.
  bool stopping() const { return remote_root_cause || reform || interrupted_by != 0 || hung; }

  void on_stop_workers(const rdzv::FailureReport& root) {
    if (state != State::kRunning || stopping()) return;
    remote_root_cause = root;
    if (root.hang) {
      // Every rank's stacks, not only the hung one's: where the others wait says why.
      const auto pids = group->running_pids();
      spdlog::warn("{}; dumping the stacks of this node's {} running worker{} (SIGABRT) and "
                   "stopping them",
                   rdzv::describe(root), pids.size(), pids.size() == 1 ? "" : "s");
      dump_at(root.time_ms, pids);
      return;
    }
    spdlog::warn("{}; stopping this node's workers", rdzv::describe(root));
    group->stop(SIGTERM);
  }

  void on_reform(const rdzv::Reform& r) {
    if (state != State::kRunning || stopping()) return;
    reform = r;
    // Not a failure: the job grows or shrinks on purpose.
    spdlog::info("round {}: {}; stopping this node's workers", r.round, rdzv::describe(r));
    group->stop(SIGTERM);
  }

  void on_rendezvous_failed(const std::string& why) {
    spdlog::error("{}", why);
    if (state == State::kRunning) {
      rendezvous_failure = why;
      group->stop(SIGTERM);
      return;
    }
    finish(kExitRendezvous);
  }

  std::string error_file_message(const GroupResult& result) const {
    if (!result.root_cause) return "";
    return read_worker_error(result.workers[*result.root_cause].error_file).message;
  }

  void on_group_done(GroupResult result) {
    if (hang_watch) hang_watch->stop();
    log_beats();
    if (hung) blame_hang(result);
    const std::vector<rdzv::RankBeat> at_dump =
        dumped_at && beats ? rank_beats(*beats, *dumped_at) : std::vector<rdzv::RankBeat>{};
    if (dumped_at) note_last_beats(result, at_dump);
    last_result = result;
    state = State::kReporting;
    if (interrupted_by != 0) {
      result.outcome = GroupResult::Outcome::kStopped;
      result.stop_signal = interrupted_by;
      print_summary(result, "");
      rdzv::FailureReport failure;
      failure.host = assignment.host;
      failure.node_rank = assignment.node_rank;
      failure.exit_code = exit_for_signal(interrupted_by);
      failure.description = fmt::format("npu_run was stopped by {}", signal_name(interrupted_by));
      rdzv::Report report{assignment.round, rdzv::Outcome::kStopped, failure, interrupted_by};
      // Leaving on purpose lets an elastic job re-form without this node. The agent hosting the
      // rendezvous cannot leave that way: with it goes the server, so the job ends.
      report.leaving = !ctx.hosts_rendezvous;
      rendezvous.report(report);
      finish(exit_for_signal(interrupted_by));
      return;
    }
    if (!rendezvous_failure.empty()) {
      print_summary(result, "the lost rendezvous");
      finish(kExitRendezvous);
      return;
    }
    rdzv::Report report{assignment.round, rdzv::Outcome::kSucceeded, std::nullopt, 0};
    report.progressed = progressed_this_attempt();
    if (dumped_at) report.stacks = rank_stacks(result, at_dump);
    if (hung) {
      report.outcome = rdzv::Outcome::kFailed;
      report.failure = hang_report(*hung);
      if (assignment.nnodes > 1) {
        spdlog::error("this node's workers failed ({}); waiting for the other nodes to stop",
                      rdzv::describe(*report.failure));
      }
    } else if (reform) {
      report.outcome = rdzv::Outcome::kStopped;  // the workers' deaths from the stop are expected
    } else if (remote_root_cause) {
      report.outcome = rdzv::Outcome::kStopped;
      // An error here may predate the failure that stopped us (a rank that raised and hung
      // while exiting): the rendezvous compares the times and keeps the earliest.
      if (result.root_cause) {
        report.failure = failure_report(result, assignment.host, assignment.node_rank,
                                        error_file_message(result));
      }
    } else if (result.outcome != GroupResult::Outcome::kSucceeded) {
      report.outcome = rdzv::Outcome::kFailed;
      report.failure =
          failure_report(result, assignment.host, assignment.node_rank, error_file_message(result));
      if (assignment.nnodes > 1) {
        spdlog::error("this node's workers failed ({}); waiting for the other nodes to stop",
                      rdzv::describe(*report.failure));
      }
    }
    rendezvous.report(report);
    // A node done first stays until the job's result is known (exit barrier): say so, or a
    // finished node that does not exit looks hung.
    if (report.outcome == rdzv::Outcome::kSucceeded && assignment.nnodes > 1)
      spdlog::info(
          "this node's workers exited 0; waiting for the job's result from the other nodes");
  }

  void on_decided(const rdzv::Decision& d) {
    if (state == State::kRunning) {
      // Only possible if this node's report was lost; the decision still binds every node.
      spdlog::warn("the job was decided while this node's workers still run; stopping them");
    }
    if (d.action == rdzv::Action::kRestart && d.membership_change) {
      const std::string cause = reform ? rdzv::describe(*reform) : "nodes joined or left";
      spdlog::info(
          "the job re-forms ({}); restarting all {} workers in a new round, not counted as a "
          "restart ({} of {} used)",
          cause, last_result.workers.size(), d.restart_count, cfg.supervision.max_restarts);
      state = State::kRendezvous;
      rendezvous.join();
      return;
    }
    if (d.action == rdzv::Action::kRestart) {
      const std::string cause = d.root_cause ? rdzv::describe(*d.root_cause) : "a failure";
      spdlog::warn("the job failed ({}); restarting all {} workers: restart {} of {}", cause,
                   last_result.workers.size(), d.restart_count, cfg.supervision.max_restarts);
      state = State::kRendezvous;
      rendezvous.join();
      return;
    }
    if (d.exit_code == kExitNoProgress) {
      spdlog::error(
          "no rank beat past its best in the last {} restart{}: not restarting (exit {}: "
          "restarting or requeueing the job would repeat it)",
          cfg.supervision.max_no_progress_restarts,
          cfg.supervision.max_no_progress_restarts == 1 ? "" : "s", kExitNoProgress);
    }
    if (d.exit_code == 0) {
      spdlog::info("all {} worker{} exited 0 after {:.2f} s", last_result.workers.size(),
                   last_result.workers.size() == 1 ? "" : "s",
                   std::chrono::duration<double>(last_result.elapsed).count());
      finish(0);
      return;
    }
    bool root_here = d.root_cause && d.root_cause->node_rank == assignment.node_rank &&
                     d.root_cause->host == assignment.host;
    // After a hang the job's comparison of every rank's stack may blame another rank.
    if (dumped_at)
      root_here = apply_hang_decision(last_result, d, assignment.node_rank, assignment.host) ||
                  (root_here && !d.root_cause->hang);
    if (last_result.outcome != GroupResult::Outcome::kSucceeded) {
      print_summary(last_result, root_here || !d.root_cause
                                     ? ""
                                     : fmt::format("a failure on node {} ({})",
                                                   d.root_cause->node_rank, d.root_cause->host));
    }
    if (d.root_cause && (!root_here || assignment.nnodes > 1)) {
      spdlog::error("the job failed; root cause: {}", rdzv::describe(*d.root_cause));
    }
    finish(d.exit_code);
  }

  void print_summary(const GroupResult& result, const std::string& stopped_because) {
    std::map<size_t, WorkerError> errors;
    for (size_t i = 0; i < result.workers.size(); ++i) {
      if (!result.workers[i].error_file.empty())
        errors[i] = read_worker_error(result.workers[i].error_file);
    }
    std::string table =
        format_failure_summary(result,
                               SummaryContext{assignment.host, assignment.node_rank,
                                              assignment.restart_count, stopped_because},
                               errors);
    if (!table.empty() && table.back() == '\n') table.pop_back();
    spdlog::error("{}", table);
  }

  void finish(int code) {
    if (state == State::kDone) return;
    state = State::kDone;
    boost::system::error_code ignored;
    signals.cancel(ignored);
    parent_watch.cancel();
    rendezvous.close();
    if (on_finished) asio::post(io, [handler = std::move(on_finished), code] { handler(code); });
  }

  static constexpr std::chrono::milliseconds kKillTimeout{5'000};

  asio::io_context& io;
  const LaunchConfig& cfg;
  Rendezvous& rendezvous;
  AgentContext ctx;
  Guardian* guardian;
  asio::signal_set signals;
  ParentWatch parent_watch;
  State state = State::kInit;
  Assignment assignment;
  std::unique_ptr<RoundWorkers> group;
  std::unique_ptr<ProgressBeats> beats;    // NPU_RUN_PROGRESS; null if it could not be made
  std::unique_ptr<StatusService> status;   // npu_run status on this host; with the beats
  std::unique_ptr<HangWatch> hang_watch;   // this attempt's, with --hang-timeout/--exit-timeout
  std::optional<Hang> hung;                // this attempt's hang, the node's root cause
  std::optional<std::chrono::steady_clock::time_point> dumped_at;  // this attempt's stack dump
  std::map<pid_t, std::vector<std::string>> kernel_frames;  // non-Python workers', at the dump
  std::vector<int64_t> best_progress;      // per local rank, over the attempts so far
  asio::steady_timer dump_timer;           // a hang's dump, at the moment every node dumps
  static constexpr std::chrono::milliseconds kDumpDelay{250};
  GroupResult last_result;
  std::optional<rdzv::FailureReport> remote_root_cause;  // set when told to stop by the rendezvous
  std::optional<rdzv::Reform> reform;                    // set when told to stop to re-form
  std::string rendezvous_failure;                        // set when the rendezvous was lost mid-run
  int interrupted_by = 0;
  Clock::time_point last_progress_log{};
  FinishedHandler on_finished;
};

LocalAgent::LocalAgent(asio::io_context& io, const LaunchConfig& cfg, Rendezvous& rendezvous,
                       AgentContext context, Guardian* guardian)
    : impl_(std::make_unique<Impl>(io, cfg, rendezvous, std::move(context), guardian)) {}

LocalAgent::~LocalAgent() = default;

void LocalAgent::start(FinishedHandler on_finished) {
  impl_->start(std::move(on_finished));
}

void LocalAgent::handle_signal(int sig) {
  impl_->on_signal(sig);
}

void LocalAgent::stop(int sig, const std::string& why) {
  impl_->stop_job(sig, why);
}

}  // namespace npu_run
