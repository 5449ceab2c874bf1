#include "agent/local_agent.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <boost/asio/io_context.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/signal_set.hpp>
#include <csignal>
#include <stdexcept>

#include "agent/agent_log.hpp"
#include "agent/agent_metrics.hpp"
#include "agent/agent_timeline.hpp"
#include "agent/attempt.hpp"
#include "agent/attempt_log.hpp"
#include "agent/beat_sampler.hpp"
#include "agent/device_release.hpp"
#include "agent/failure_evidence.hpp"
#include "agent/failure_reports.hpp"
#include "agent/failure_summary.hpp"
#include "agent/health_gate.hpp"
#include "agent/job_checks.hpp"
#include "agent/metrics_server.hpp"
#include "agent/oom_kills.hpp"
#include "agent/parent_watch.hpp"
#include "agent/progress_record.hpp"
#include "agent/scheduler_workers.hpp"
#include "agent/status_service.hpp"
#include "agent/worker_plan.hpp"
#include "basics/enum_table.hpp"
#include "basics/exit_status.hpp"
#include "basics/usage_error.hpp"
#include "net/host_address.hpp"
#include "rendezvous/describe.hpp"
#include "rendezvous/protocol.hpp"
#include "workers/escaped_processes.hpp"
#include "workers/guardian.hpp"

namespace npu_run {

namespace asio = boost::asio;
using Clock = std::chrono::steady_clock;
using State = LocalAgent::State;

namespace {

// The table of local_agent.hpp; entering DONE is allowed from every other state.
constexpr std::pair<State, State> kTransitions[] = {
    {State::kInit, State::kRendezvous},      {State::kRendezvous, State::kRunning},
    {State::kRendezvous, State::kReporting}, {State::kRunning, State::kReporting},
    {State::kRunning, State::kRendezvous},   {State::kReporting, State::kRendezvous},
};

constexpr EnumTable<State, 5> kStateNames({{{State::kInit, "INIT"},
                                            {State::kRendezvous, "RENDEZVOUS"},
                                            {State::kRunning, "RUNNING"},
                                            {State::kReporting, "REPORTING"},
                                            {State::kDone, "DONE"}}});

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

bool LocalAgent::allowed(State from, State to) {
  if (to == State::kDone) return from != State::kDone;
  return std::find(std::begin(kTransitions), std::end(kTransitions), std::pair{from, to}) !=
         std::end(kTransitions);
}

struct LocalAgent::Impl {
  Impl(asio::io_context& io_context, const LaunchConfig& config, Rendezvous& rdzv,
       AgentContext context, Guardian* guardian)
      : io(io_context),
        cfg(config),
        rendezvous(rdzv),
        ctx(std::move(context)),
        signals(io_context),
        parent_watch(io_context),
        health(io_context, config, ctx.host, ctx.agent_env),
        device_release(io_context, device_release_settings(
                                       config, ctx.agent_env,
                                       std::string(kAgentMarkVariable) + "=" + agent_mark())),
        timeline(config.shape.nproc_per_node),
        beat_sampler(io_context) {
    for (int sig : handled_signals()) signals.add(sig);
    if (!ctx.make_workers) ctx.make_workers = worker_groups(io, guardian);
    if (guardian != nullptr) guardian_pid = guardian->pid();
    open_progress_sockets();
    if (cfg.records.metrics_port != 0) {
      metrics_server =
          std::make_unique<MetricsServer>(io, cfg.records.metrics_addr, cfg.records.metrics_port,
                                          [this] { return metrics_text(); });
    }
    if (beats) {
      status = std::make_unique<StatusService>(
          io, rendezvous, *beats, [this]() -> std::optional<StatusService::Seat> {
            if (state != State::kRunning && state != State::kReporting) return std::nullopt;
            return StatusService::Seat{attempt->assignment.node_rank, attempt->assignment.host};
          });
    }
  }

  void move_to(State next) {
    if (!allowed(state, next)) {
      throw std::logic_error(fmt::format("agent: no move from {} to {}", kStateNames.name(state),
                                         kStateNames.name(next)));
    }
    state = next;
  }

  // ---- INIT -> RENDEZVOUS ----

  void start(FinishedHandler handler) {
    on_finished = std::move(handler);
    wait_for_signal();
    if (cfg.supervision.stop_with_parent) watch_parent();
    move_to(State::kRendezvous);
    Rendezvous::Handlers handlers{
        [this](const Assignment& a) { on_assigned(a); },
        [this](const rdzv::FailureReport& root) { on_stop_workers(root); },
        [this](const rdzv::Reform& r) { on_reform(r); },
        [this](const rdzv::Decision& d) { on_decided(d); },
        [this](const rdzv::Progress& p) { on_progress(p); },
        [this](const std::string& why) { on_rendezvous_failed(why); },
        [this](const std::string& why) { on_health_gate_failed(why); },
        [this] { return status ? status->changed_beats() : std::nullopt; },
    };
    handlers.pings = [this](const rdzv::PingRequest& request) { on_ping_request(request); };
    handlers.ping_verdict = [this](const rdzv::PingVerdict& v) { health.pinged(v.findings); };
    handlers.standby = [this](const rdzv::Standby& s) { on_standby(s); };
    handlers.dismissed = [this](const rdzv::Dismissed& d) { on_dismissed(d); };
    rendezvous.start(std::move(handlers));
    join_round();
  }

  // Joins the next round; the node's health checks run while the rendezvous waits for the
  // others, and their verdict follows the join.
  void join_round() {
    metrics.join_sent(Clock::now());
    rendezvous.join();
    health.check([this](const NodeVerdict& verdict) {
      metrics.gate_took(verdict.elapsed_ms);
      if (state == State::kRendezvous || state == State::kRunning)
        rendezvous.send_health(rdzv::HealthReport{compact(verdict)});
    });
  }

  // Before the round forms: this node's device-plane pings, answered when all have run.
  void on_ping_request(const rdzv::PingRequest& request) {
    if (state != State::kRendezvous) return;
    const uint64_t run = request.run;
    health.ping(request.pings, [this, run](std::vector<PingResult> results) {
      if (state != State::kRendezvous) return;
      // Within what the server takes from an agent (a client frame).
      using Limits = rdzv::Limits;
      if (results.size() > Limits::kMaxPings) results.resize(Limits::kMaxPings);
      for (PingResult& r : results) {
        if (r.detail.size() > Limits::kMaxPingText) r.detail.resize(Limits::kMaxPingText);
      }
      rendezvous.send_pings(rdzv::PingReport{run, std::move(results)});
    });
  }

  void on_health_gate_failed(const std::string& why) {
    spdlog::error("{}", why);
    health.stop();
    health.job_stopped();
    finish(kExitHealth);
  }

  // --spares: no seat in this round; this agent waits to take a lost node's.
  void on_standby(const rdzv::Standby& s) {
    if (state != State::kRendezvous) return;
    spdlog::info(
        "standing by as a spare of round {} ({} node{} run, {} spare{} wait): no workers here "
        "until the job loses a node, whose seat this agent then takes",
        s.round, s.nodes, s.nodes == 1 ? "" : "s", s.spares, s.spares == 1 ? "" : "s");
  }

  // A spare the job no longer needs, or this node taken out for a fault of its own.
  void on_dismissed(const rdzv::Dismissed& d) {
    if (state == State::kRunning) {
      // Never sent while workers run; if it were, they stop first.
      on_rendezvous_failed(d.reason);
      return;
    }
    if (d.exit_code == 0)
      spdlog::info("{}: leaving", d.reason);
    else
      spdlog::error("{}: leaving", d.reason);
    finish(d.exit_code);
  }

  void on_progress(const rdzv::Progress& p) {
    const auto now = Clock::now();
    if (now - last_progress_log < kProgressLogInterval) return;
    last_progress_log = now;
    spdlog::info("rendezvous at {}: {}", rendezvous.describe(), describe_progress(p));
  }

  // ---- RENDEZVOUS -> RUNNING, or REPORTING when the job cannot run here ----

  void on_assigned(const Assignment& assigned) {
    if (state != State::kRendezvous) return;
    // A gating node was assigned once its verdict passed; no recheck is due. (One that only
    // warns may still be checking: its verdict is still shown.)
    if (cfg.health.mode == HealthMode::kGate) health.stop();
    for (const std::string& note : assigned.health_notes) spdlog::warn("health gate: {}", note);
    set_agent_log_identity(assigned.node_rank, assigned.host);
    attempt = std::make_unique<Attempt>(assigned);
    timeline.new_round(assigned.rank_offset);
    metrics.seated(Clock::now());
    if (assigned.nnodes > 1) attempt->assignment.socket_ifname = socket_interface();
    std::optional<std::string> refusal = job_refusal(cfg, assigned);
    if (!refusal) {
      try {
        attempt->assignment.rank_table_file = rank_table_file(cfg, assigned, ctx.run_dir);
      } catch (const UsageError& e) {
        refusal = e.what();
      }
    }
    if (refusal) {
      spdlog::error("{}", *refusal);
      move_to(State::kReporting);
      rendezvous.report(rdzv::Report{assigned.round, rdzv::Outcome::kFailed,
                                     refusal_failure(assigned, *refusal), 0, true});
      return;
    }
    // The devices must be free first: never a start into "device busy".
    awaiting_devices = true;
    device_release.start([this, mine = attempt.get()](const std::string& held) {
      if (attempt.get() != mine || state != State::kRendezvous) return;
      awaiting_devices = false;
      if (held.empty()) {
        start_workers();
        return;
      }
      spdlog::error("{} after {:.0f} s: this node cannot run the attempt", held,
                    std::chrono::duration<double>(cfg.supervision.device_release_timeout).count());
      move_to(State::kReporting);
      rendezvous.report(rdzv::Report{attempt->assignment.round, rdzv::Outcome::kFailed,
                                     devices_held_failure(attempt->assignment, held), 0});
    });
  }

  void start_workers() {
    const Assignment& a = attempt->assignment;
    std::vector<WorkerSpec> specs = make_worker_specs(
        cfg, a, AttemptLayout{ctx.run_dir, ctx.log_files, a.restart_count}, ctx.agent_env);
    add_progress_env(specs, beats.get(), cfg, ctx.agent_env);
    log_attempt_start(cfg, a, ctx.agent_env, specs.size());
    move_to(State::kRunning);
    attempt->started = std::chrono::system_clock::now();
    attempt->oom_kills_before = own_oom_kill_count();
    StopPolicy policy{cfg.supervision.term_timeout, kKillTimeout};
    const AttemptLayout layout{ctx.run_dir, ctx.log_files, a.restart_count};
    if (auto scheduler = make_scheduler_spec(cfg, a, layout, ctx.agent_env)) {
      // Node 0 of a MindSpore dynamic cluster: its scheduler first, stopped last.
      spdlog::info("starting MindSpore's scheduler (MS_ROLE=MS_SCHED) on {}:{}",
                   a.worker_master_addr, a.worker_master_port);
      policy.sweep_escaped = false;
      auto scheduler_group = ctx.make_workers({std::move(*scheduler)}, policy);
      auto workers = ctx.make_workers(std::move(specs), policy);
      std::vector<pid_t> spare;
      if (guardian_pid > 0) spare.push_back(guardian_pid);
      attempt->group = scheduler_beside_workers(io, std::move(scheduler_group), std::move(workers),
                                                kSchedulerGrace, std::move(spare));
    } else {
      attempt->group = ctx.make_workers(std::move(specs), policy);
    }
    npu_info_file("npu_info_before.txt");
    if (beats) beats->new_attempt();
    attempt->hangs = std::make_unique<HangResponse>(
        io,
        HangResponse::Context{cfg, attempt->assignment, beats.get(), *attempt->group, rendezvous},
        [this](const Hang& h) { on_hang(h); });
    // The end of this attempt's workers, not of an earlier attempt's that a decision overtook.
    attempt->group->start([this, mine = attempt.get()](GroupResult result) {
      if (attempt.get() == mine && state == State::kRunning) on_group_done(std::move(result));
    });
    attempt->hangs->start();
    metrics.workers_spawned(Clock::now());
    const int workers = cfg.shape.nproc_per_node;
    timeline.note(rdzv::TimelinePhase::kSpawned, -1,
                  fmt::format("{} worker{}", workers, workers == 1 ? "" : "s"));
    if (beats) beat_sampler.start(timeline, *beats);
  }

  // FaultDiag's view of the devices at this attempt's start or end, under --log-dir only.
  void npu_info_file(const char* name) {
    if (!cfg.output.log_dir) return;
    health.npu_info(
        fmt::format("{}/attempt_{}/{}", ctx.run_dir, attempt->assignment.restart_count, name));
  }

  // The interface of the address peers use for this node, found once.
  std::string socket_interface() {
    if (!socket_ifname) {
      const std::string address = rendezvous.local_address();
      socket_ifname = address.empty() ? "" : net::interface_of_address(address);
      if (!address.empty() && socket_ifname->empty())
        spdlog::warn(
            "no interface of this host holds {}, the address peers use for it: the "
            "workers' *_SOCKET_IFNAME are left unset",
            address);
    }
    return *socket_ifname;
  }

  // ---- RUNNING: the workers are stopped, for the first reason ----

  void on_hang(const Hang& h) {
    if (state != State::kRunning || attempt->stopping()) return;
    attempt->job_stop = h;
    attempt->hangs->respond(h);
  }

  // The job stopped while this node still waited for its devices: no worker started here.
  bool stopped_before_start() {
    if (state != State::kRendezvous || !awaiting_devices) return false;
    awaiting_devices = false;
    device_release.cancel();
    move_to(State::kReporting);
    rendezvous.report(
        rdzv::Report{attempt->assignment.round, rdzv::Outcome::kStopped, std::nullopt, 0});
    return true;
  }

  void on_stop_workers(const rdzv::FailureReport& root) {
    if (stopped_before_start()) return;
    if (state != State::kRunning || attempt->stopping()) return;
    attempt->job_stop = root;
    if (root.hang) {
      attempt->hangs->dump_for(root);
      return;
    }
    spdlog::warn("{}; stopping this node's workers", rdzv::describe(root));
    attempt->group->stop(SIGTERM);
  }

  void on_reform(const rdzv::Reform& r) {
    if (stopped_before_start()) return;
    if (state != State::kRunning || attempt->stopping()) return;
    attempt->job_stop = r;
    // Not a failure: the job grows or shrinks on purpose.
    spdlog::info("round {}: {}; stopping this node's workers", r.round, rdzv::describe(r));
    attempt->group->stop(SIGTERM);
  }

  void on_rendezvous_failed(const std::string& why) {
    spdlog::error("{}", why);
    if (state == State::kRunning) {
      attempt->rendezvous_lost = why;
      attempt->group->stop(SIGTERM);
      return;
    }
    finish(kExitRendezvous);
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
      finish(exit_for_signal(sig));
      return;
    }
    if (attempt->interrupted_by == 0) {
      attempt->interrupted_by = sig;
      spdlog::warn(
          "{}: stopping the workers (SIGKILL after {:.1f} s; send it again to kill at once)", why,
          std::chrono::duration<double>(cfg.supervision.term_timeout).count());
    } else {
      spdlog::warn("{} again: sending SIGKILL to the workers now", why);
    }
    attempt->group->stop(sig);
  }

  // ---- RUNNING -> REPORTING, or DONE ----

  void on_group_done(GroupResult result) {
    attempt->hangs->stop();
    beat_sampler.stop();
    metrics.workers_done(Clock::now());
    npu_info_file("npu_info_after.txt");
    if (beats) beats->collect_now();
    ProgressRecord::log(beats.get(), attempt->assignment.restart_count);
    GroupEnd end;
    end.result = std::move(result);
    attempt->hangs->annotate(end.result, attempt->hang());
    end.progressed = progress.progressed(beats.get());
    end.stacks = attempt->hangs->stacks(end.result);
    if (end.result.root_cause) root_cause_evidence(end);
    if (const Hang* hang = attempt->hang()) end.hang = attempt->hangs->failure(*hang);
    attempt->result = end.result;
    move_to(State::kReporting);
    AttemptEnd next = report_for(end, *attempt, ctx.hosts_rendezvous);
    if (next.summary) print_summary(*next.summary, attempt->assignment, next.stopped_because);
    if (next.report) {
      next.report->timeline = round_events(end.result);
      rendezvous.report(*next.report);
    }
    if (next.leave_with) {
      finish(*next.leave_with);
      return;
    }
    log_report_sent(*next.report, attempt->assignment.nnodes);
  }

  // This round's timeline for the report: the root cause's failure and the workers' end too.
  std::vector<rdzv::TimelineEvent> round_events(const GroupResult& result) {
    if (result.root_cause) {
      const WorkerOutcome& w = result.workers[*result.root_cause];
      timeline.note(
          rdzv::TimelinePhase::kFailed, w.global_rank, w.status.describe(),
          std::chrono::duration_cast<std::chrono::milliseconds>(failed_at(w).time_since_epoch())
              .count());
    }
    timeline.note(rdzv::TimelinePhase::kExited);
    return timeline.take(beats.get());
  }

  // What the root cause's error file and output say, for the restart classification.
  void root_cause_evidence(GroupEnd& end) const {
    const WorkerOutcome& w = end.result.workers[*end.result.root_cause];
    const WorkerError error = read_worker_error(w.error_file);
    end.root_cause_error = error.message;
    const std::optional<uint64_t> oom_kills = own_oom_kill_count();
    const bool oom_killed =
        oom_kills && attempt->oom_kills_before && *oom_kills > *attempt->oom_kills_before;
    const bool has_beats = beats && w.local_rank >= 0 && w.local_rank < beats->local_ranks();
    end.evidence = failure_evidence(
        EvidenceSources{w, error, has_beats ? beats->rank(w.local_rank).text : std::string(),
                        attempt->started, cfg.supervision.startup_window, oom_killed});
  }

  // ---- REPORTING -> RENDEZVOUS, or DONE ----

  void on_decided(const rdzv::Decision& d) {
    // Decisions go to the members of a round; this node is one only once it was assigned.
    if (state != State::kRunning && state != State::kReporting) {
      spdlog::debug("a decision for round {} while not in a round: ignored", d.round);
      return;
    }
    if (state == State::kRunning) {
      // Only possible if this node's report was lost; the decision still binds every node.
      spdlog::warn("the job was decided while this node's workers still run; stopping them");
    }
    metrics.decided(d);
    if (d.action == rdzv::Action::kRestart) {
      log_restart(cfg, d, *attempt);
      move_to(State::kRendezvous);
      join_round();
      return;
    }
    if (d.exit_code == 0) {
      log_success(*attempt);
    } else {
      log_job_failure(cfg, d, *attempt);
    }
    finish(d.exit_code);
  }

  // ---- DONE ----

  void finish(int code) {
    if (state == State::kDone) return;
    move_to(State::kDone);
    boost::system::error_code ignored;
    signals.cancel(ignored);
    parent_watch.cancel();
    health.stop();
    device_release.cancel();
    rendezvous.close();
    // The last npu_info file is finished first (a stop signal cuts it short).
    const bool hurry = attempt && attempt->interrupted_by != 0;
    // The handler moves into the callback: it runs after this agent may be gone (it never runs
    // if the agent, and with it the gate that holds the callback, is destroyed first).
    health.after_npu_info(
        [handler = std::move(on_finished), code] {
          if (handler) handler(code);
        },
        hurry);
  }

  // --metrics-port: this node's metrics, the rendezvous' and the store's, as of now.
  std::string metrics_text() {
    MetricsText out;
    const bool seated = attempt && (state == State::kRunning || state == State::kReporting);
    RoundWorkers* group = state == State::kRunning && attempt ? attempt->group.get() : nullptr;
    const NodeView view{ctx.host, std::string(kStateNames.name(state)),
                        seated ? attempt->assignment.rank_offset : 0,
                        group ? group->running_pids().size() : 0, beats.get()};
    write_agent_metrics(out, metrics, view, Clock::now());
    rendezvous.add_metrics(out);
    for (const auto& source : ctx.metrics_sources) source(out);
    return out.text();
  }

  // ---- around the states: signals, the parent, the progress sockets ----

  // The stop signals of --signals-to-handle, plus SIGUSR1/SIGUSR2 to forward (Slurm's
  // --signal=USR1@60 warning) unless the user made them stop signals.
  std::vector<int> handled_signals() const {
    std::vector<int> all = cfg.supervision.stop_signals;
    for (int sig : {SIGUSR1, SIGUSR2}) {
      if (std::find(all.begin(), all.end(), sig) == all.end()) all.push_back(sig);
    }
    return all;
  }

  void wait_for_signal() {
    signals.async_wait([this](const boost::system::error_code& ec, int sig) {
      if (ec) return;  // cancelled at the end of the job
      on_signal(sig);
      wait_for_signal();
    });
  }

  void on_signal(int sig) {
    const auto& stops = cfg.supervision.stop_signals;
    if (std::find(stops.begin(), stops.end(), sig) != stops.end()) {
      stop_job(sig, "received " + signal_name(sig));
      return;
    }
    RoundWorkers* group = state == State::kRunning ? attempt->group.get() : nullptr;
    const auto pids = group ? group->running_pids() : std::vector<pid_t>{};
    spdlog::info("received {}: forwarded to {} worker process group{}", signal_name(sig),
                 pids.size(), pids.size() == 1 ? "" : "s");
    if (group) group->forward_signal(sig);
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

  static constexpr std::chrono::milliseconds kKillTimeout{5'000};

  asio::io_context& io;
  const LaunchConfig& cfg;
  Rendezvous& rendezvous;
  AgentContext ctx;
  asio::signal_set signals;
  ParentWatch parent_watch;
  HealthGate health;                         // the node's checks before each round (--health-check)
  pid_t guardian_pid = 0;                    // spared by the sweep of escaped processes
  DeviceRelease device_release;              // this node's devices free before each attempt
  bool awaiting_devices = false;             // assigned, the devices not yet free
  std::optional<std::string> socket_ifname;  // socket_interface(), once asked
  State state = State::kInit;
  std::unique_ptr<Attempt> attempt;       // this round's; a fresh one for every round
  std::unique_ptr<ProgressBeats> beats;   // NPU_RUN_PROGRESS; null if it could not be made
  std::unique_ptr<StatusService> status;  // npu_run status on this host; with the beats
  AgentTimeline timeline;                 // this round's events, sent with its report
  AgentMetrics metrics;                   // for --metrics-port
  std::unique_ptr<MetricsServer> metrics_server;
  BeatSampler beat_sampler;  // samples the beats into it while workers run
  ProgressRecord progress;   // over the attempts so far
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
