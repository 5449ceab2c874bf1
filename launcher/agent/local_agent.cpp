#include "agent/local_agent.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <boost/asio/io_context.hpp>
#include <csignal>
#include <stdexcept>

#include "agent/core/attempt.hpp"
#include "agent/core/attempt_log.hpp"
#include "agent/core/scheduler_workers.hpp"
#include "agent/core/stop_requests.hpp"
#include "agent/health/device_release.hpp"
#include "agent/plan/job_checks.hpp"
#include "agent/plan/worker_plan.hpp"
#include "agent/records/agent_log.hpp"
#include "agent/rooms/agent_rooms.hpp"
#include "agent/round/failure_reports.hpp"
#include "basics/exit_status.hpp"
#include "rendezvous/protocol/describe.hpp"
#include "workers/escaped_processes.hpp"
#include "workers/guardian.hpp"
#include "workers/progress_beats.hpp"

namespace npu_run {

namespace asio = boost::asio;
using State = LocalAgent::State;

namespace {

// The table of local_agent.hpp; entering DONE is allowed from every other state.
constexpr std::pair<State, State> kTransitions[] = {
    {State::kInit, State::kRendezvous},      {State::kRendezvous, State::kRunning},
    {State::kRendezvous, State::kReporting}, {State::kRunning, State::kReporting},
    {State::kRunning, State::kRendezvous},   {State::kReporting, State::kRendezvous},
};

}  // namespace

bool LocalAgent::allowed(State from, State to) {
  if (to == State::kDone) return from != State::kDone;
  return std::find(std::begin(kTransitions), std::end(kTransitions), std::pair{from, to}) !=
         std::end(kTransitions);
}

struct LocalAgent::Impl final : RoomHost {
  Impl(asio::io_context& io_context, const LaunchConfig& config, Rendezvous& rdzv,
       AgentContext context, Guardian* guardian)
      : io(io_context),
        cfg(config),
        rendezvous(rdzv),
        ctx(std::move(context)),
        stops(io_context, config.supervision,
              {[this](int sig, const std::string& why) { stop_job(sig, why); },
               [this] { return current == State::kRunning ? round->group.get() : nullptr; }}),
        device_release(io_context, device_release_settings(
                                       config, ctx.agent_env,
                                       std::string(kAgentMarkVariable) + "=" + agent_mark())) {
    if (!ctx.make_workers) ctx.make_workers = worker_groups(io, guardian);
    if (guardian != nullptr) guardian_pid = guardian->pid();
    beats = open_progress_sockets(io, cfg);
    add_agent_rooms(rooms, RoomContext{io, cfg, rendezvous, ctx, *this, beats.get()});
  }

  // ---- what the rooms may ask (RoomHost) ----

  State state() const override { return current; }
  const Attempt* attempt() const override { return round.get(); }

  void hung(const Hang& h) override {
    if (!stoppable()) return;
    round->job_stop = h;
    round->hangs->respond(h);
  }

  void move_to(State next) {
    if (!allowed(current, next)) {
      throw std::logic_error(
          fmt::format("agent: no move from {} to {}", state_name(current), state_name(next)));
    }
    current = next;
  }

  // ---- INIT -> RENDEZVOUS ----

  void start(FinishedHandler handler) {
    on_finished = std::move(handler);
    stops.start();
    move_to(State::kRendezvous);
    Rendezvous::Handlers handlers;
    handlers.assigned = [this](const Assignment& a) { on_assigned(a); };
    handlers.failed = [this](const std::string& why) { on_rendezvous_failed(why); };
    handlers.health_failed = [this](const std::string& why) {
      spdlog::error("{}", why);
      finish(kExitHealth);
    };
    handlers.message = [this](const rdzv::ServerMessage& m) { inbox.deliver(m); };
    inbox.on<rdzv::StopWorkers>(
        [this](const rdzv::StopWorkers& m) { on_stop_workers(m.root_cause); });
    inbox.on<rdzv::Reform>([this](const rdzv::Reform& r) { on_reform(r); });
    inbox.on<rdzv::Decision>([this](const rdzv::Decision& d) { on_decided(d); });
    inbox.on<rdzv::Dismissed>([this](const rdzv::Dismissed& d) { on_dismissed(d); });
    rooms.each([&](AgentRoom& room) { room.listen(handlers, inbox); });
    rendezvous.start(std::move(handlers));
    join_round();
  }

  void join_round() {
    rendezvous.join();
    rooms.each([](AgentRoom& room) { room.joining(); });
  }

  // A spare the job no longer needs, or this node taken out for a fault of its own.
  void on_dismissed(const rdzv::Dismissed& d) {
    if (current == State::kRunning) {
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

  // ---- RENDEZVOUS -> RUNNING, or REPORTING when the job cannot run here ----

  void on_assigned(const Assignment& assigned) {
    if (current != State::kRendezvous) return;
    set_agent_log_identity(assigned.node_rank, assigned.host);
    round = std::make_unique<Attempt>(assigned);
    rooms.each([&](AgentRoom& room) { room.assigned(assigned); });
    if (assigned.nnodes > 1) {
      // Found once: the address peers use stays this node's.
      if (!socket_ifname) socket_ifname = socket_interface_of(rendezvous.local_address());
      round->assignment.socket_ifname = *socket_ifname;
    }
    if (auto refusal = prepare_round(cfg, round->assignment, ctx.run_dir)) {
      spdlog::error("{}", *refusal);
      move_to(State::kReporting);
      rendezvous.report(rdzv::Report{assigned.round, rdzv::Outcome::kFailed,
                                     refusal_failure(assigned, *refusal), 0, true});
      return;
    }
    // The devices must be free first: never a start into "device busy".
    awaiting_devices = true;
    device_release.start([this, mine = round.get()](const std::string& held) {
      if (round.get() != mine || current != State::kRendezvous) return;
      awaiting_devices = false;
      if (held.empty()) {
        start_workers();
        return;
      }
      spdlog::error("{} after {:.0f} s: this node cannot run the attempt", held,
                    std::chrono::duration<double>(cfg.supervision.device_release_timeout).count());
      move_to(State::kReporting);
      rendezvous.report(rdzv::Report{round->assignment.round, rdzv::Outcome::kFailed,
                                     devices_held_failure(round->assignment, held), 0});
    });
  }

  void start_workers() {
    const Assignment& a = round->assignment;
    const AttemptLayout layout{ctx.run_dir, ctx.log_files, a.restart_count};
    std::vector<WorkerSpec> specs = make_worker_specs(cfg, a, layout, ctx.agent_env);
    rooms.each([&](AgentRoom& room) { room.starting(specs); });
    log_attempt_start(cfg, a, ctx.agent_env, specs.size());
    move_to(State::kRunning);
    round->started = std::chrono::system_clock::now();
    round->group = round_workers(
        io, ctx.make_workers, std::move(specs), make_scheduler_spec(cfg, a, layout, ctx.agent_env),
        StopPolicy{.term_timeout = cfg.supervision.term_timeout}, guardian_pid);
    // The end of this attempt's workers, not of an earlier attempt's that a decision overtook.
    round->group->start([this, mine = round.get()](GroupResult result) {
      if (round.get() == mine && current == State::kRunning) on_group_done(std::move(result));
    });
    rooms.each([&](AgentRoom& room) { room.started(*round); });
  }

  // ---- RUNNING: the workers are stopped, for the first reason ----

  // The job stopped while this node still waited for its devices: no worker started here.
  bool stopped_before_start() {
    if (current != State::kRendezvous || !awaiting_devices) return false;
    awaiting_devices = false;
    device_release.cancel();
    move_to(State::kReporting);
    rendezvous.report(
        rdzv::Report{round->assignment.round, rdzv::Outcome::kStopped, std::nullopt, 0});
    return true;
  }

  // Workers run that nothing stops yet: the first reason to stop them stands.
  bool stoppable() const { return current == State::kRunning && !round->stopping(); }

  void on_stop_workers(const rdzv::FailureReport& root) {
    if (stopped_before_start() || !stoppable()) return;
    round->job_stop = root;
    if (root.hang) {
      round->hangs->dump_for(root);
      return;
    }
    spdlog::warn("{}; stopping this node's workers", rdzv::describe(root));
    round->group->stop(SIGTERM);
  }

  void on_reform(const rdzv::Reform& r) {
    if (stopped_before_start() || !stoppable()) return;
    round->job_stop = r;
    // Not a failure: the job grows or shrinks on purpose.
    spdlog::info("round {}: {}; stopping this node's workers", r.round, rdzv::describe(r));
    round->group->stop(SIGTERM);
  }

  void on_rendezvous_failed(const std::string& why) {
    spdlog::error("{}", why);
    if (current == State::kRunning) {
      round->rendezvous_lost = why;
      round->group->stop(SIGTERM);
      return;
    }
    finish(kExitRendezvous);
  }

  // Stops this node's part of the job as the stop signal `sig` does (`why` says what happened);
  // a second call escalates to SIGKILL.
  void stop_job(int sig, const std::string& why) {
    if (current == State::kDone) return;
    if (current != State::kRunning) {
      // No workers are running: leave the job at once.
      spdlog::warn("{} while {}: leaving the job", why,
                   current == State::kReporting ? "waiting for the job's decision"
                                                : "waiting for the rendezvous");
      finish(exit_for_signal(sig));
      return;
    }
    if (round->interrupted_by == 0) {
      round->interrupted_by = sig;
      spdlog::warn(
          "{}: stopping the workers (SIGKILL after {:.1f} s; send it again to kill at once)", why,
          std::chrono::duration<double>(cfg.supervision.term_timeout).count());
    } else {
      spdlog::warn("{} again: sending SIGKILL to the workers now", why);
    }
    round->group->stop(sig);
  }

  // ---- RUNNING -> REPORTING, or DONE ----

  void on_group_done(GroupResult result) {
    GroupEnd end;
    end.result = std::move(result);
    rooms.each([&](AgentRoom& room) { room.done(end, *round); });
    round->result = end.result;
    move_to(State::kReporting);
    AttemptEnd next = report_for(end, *round, ctx.hosts_rendezvous);
    if (next.summary) print_summary(*next.summary, round->assignment, next.stopped_because);
    if (next.report) {
      rooms.each([&](AgentRoom& room) { room.reporting(*next.report, end); });
      rendezvous.report(*next.report);
    }
    if (next.leave_with) {
      finish(*next.leave_with);
      return;
    }
    log_report_sent(*next.report, round->assignment.nnodes);
  }

  // ---- REPORTING -> RENDEZVOUS, or DONE ----

  void on_decided(const rdzv::Decision& d) {
    // Decisions go to the members of a round; this node is one only once it was assigned.
    if (current != State::kRunning && current != State::kReporting) {
      spdlog::debug("a decision for round {} while not in a round: ignored", d.round);
      return;
    }
    if (current == State::kRunning) {
      // Only possible if this node's report was lost; the decision still binds every node.
      spdlog::warn("the job was decided while this node's workers still run; stopping them");
    }
    rooms.each([&](AgentRoom& room) { room.decided(d); });
    if (d.action == rdzv::Action::kRestart) {
      log_restart(cfg, d, *round);
      move_to(State::kRendezvous);
      join_round();
      return;
    }
    if (d.exit_code == 0) {
      log_success(*round);
    } else {
      log_job_failure(cfg, d, *round);
    }
    finish(d.exit_code);
  }

  // ---- DONE ----

  void finish(int code) {
    if (current == State::kDone) return;
    move_to(State::kDone);
    stops.cancel();
    device_release.cancel();
    rendezvous.close();
    // The handler moves into the rooms' countdown: it runs after this agent may be gone (it
    // never runs if the agent, and with it a room that holds the countdown, goes first).
    rooms.finishing([handler = std::move(on_finished), code] {
      if (handler) handler(code);
    });
  }

  asio::io_context& io;
  const LaunchConfig& cfg;
  Rendezvous& rendezvous;
  AgentContext ctx;
  StopRequests stops;                        // signals and the parent watch
  pid_t guardian_pid = 0;                    // spared by the sweep of escaped processes
  DeviceRelease device_release;              // this node's devices free before each attempt
  bool awaiting_devices = false;             // assigned, the devices not yet free
  std::optional<std::string> socket_ifname;  // for the workers' *_SOCKET_IFNAME, once found
  State current = State::kInit;
  std::unique_ptr<Attempt> round;        // this round's; a fresh one for every round
  std::unique_ptr<ProgressBeats> beats;  // NPU_RUN_PROGRESS; null if it could not be made
  Inbox inbox;                           // the rendezvous' messages, to the agent and rooms
  AgentRooms rooms;                      // after what they use: they go first
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
  impl_->stops.on_signal(sig);
}

void LocalAgent::stop(int sig, const std::string& why) {
  impl_->stop_job(sig, why);
}

}  // namespace npu_run
