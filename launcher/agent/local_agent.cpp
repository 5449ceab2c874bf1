#include "npu_run/local_agent.hpp"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <boost/asio/io_context.hpp>
#include <boost/asio/signal_set.hpp>
#include <csignal>

#include "npu_run/agent_log.hpp"
#include "npu_run/failure_summary.hpp"
#include "npu_run/worker_env.hpp"
#include "npu_run/worker_group.hpp"
#include "npu_run/worker_spec.hpp"

namespace npu_run {

namespace asio = boost::asio;

struct LocalAgent::Impl {
  Impl(asio::io_context& io_context, const LaunchConfig& config, Rendezvous& rdzv,
       AgentContext context, Guardian* g)
      : io(io_context),
        cfg(config),
        rendezvous(rdzv),
        ctx(std::move(context)),
        guardian(g),
        signals(io_context) {
    for (int sig : handled_signals()) signals.add(sig);
  }

  // The stop signals of --signals-to-handle, plus SIGUSR1/SIGUSR2 to forward (Slurm's
  // --signal=USR1@60 warning) unless the user made them stop signals.
  std::vector<int> handled_signals() const {
    std::vector<int> all = cfg.stop_signals;
    for (int sig : {SIGUSR1, SIGUSR2}) {
      if (std::find(all.begin(), all.end(), sig) == all.end()) all.push_back(sig);
    }
    return all;
  }

  bool is_stop_signal(int sig) const {
    return std::find(cfg.stop_signals.begin(), cfg.stop_signals.end(), sig) !=
           cfg.stop_signals.end();
  }

  int run() {
    wait_for_signal();
    state = State::kRendezvous;
    rendezvous.async_next_round([this](const Assignment& a) { on_assigned(a); });
    io.run();
    return exit_code;
  }

  void wait_for_signal() {
    signals.async_wait([this](const boost::system::error_code& ec, int sig) {
      if (ec) return;  // cancelled at the end of the job
      on_signal(sig);
      wait_for_signal();
    });
  }

  void on_signal(int sig) {
    if (!is_stop_signal(sig)) {
      const auto pids = group ? group->running_pids() : std::vector<pid_t>{};
      spdlog::info("received {}: forwarded to {} worker process group{}", signal_name(sig),
                   pids.size(), pids.size() == 1 ? "" : "s");
      if (group) group->forward_signal(sig);
      return;
    }
    if (interrupted_by == 0) {
      interrupted_by = sig;
      spdlog::warn(
          "received {}: stopping the workers (SIGKILL after {:.1f} s; send it again to kill at "
          "once)",
          signal_name(sig), std::chrono::duration<double>(cfg.term_timeout).count());
    } else {
      spdlog::warn("received {} again: sending SIGKILL to the workers now", signal_name(sig));
    }
    if (state == State::kRunning) {
      group->stop(sig);
    } else if (state == State::kRendezvous || state == State::kRestarting) {
      state = State::kStopping;
      finish(128 + sig);
    }
  }

  void on_assigned(const Assignment& a) {
    if (state == State::kStopping || state == State::kSucceeded || state == State::kFailed) return;
    assignment = a;
    set_agent_log_identity(a.node_rank, a.host);
    const AttemptLayout layout{ctx.run_dir, ctx.log_files, restart_count};
    std::vector<WorkerSpec> specs = make_worker_specs(cfg, a, layout, ctx.agent_env);
    if (restart_count == 0 && omp_threads_defaulted(cfg, ctx.agent_env)) {
      spdlog::info(
          "OMP_NUM_THREADS is unset: setting it to 1 for each of the {} workers (export it to "
          "choose)",
          cfg.nproc_per_node);
    }
    spdlog::info("starting {} worker{} (ranks {}-{} of {}, attempt {}), workers' store at {}:{}",
                 specs.size(), specs.size() == 1 ? "" : "s", a.rank_offset,
                 a.rank_offset + cfg.nproc_per_node - 1, a.world_size, restart_count,
                 a.worker_master_addr, a.worker_master_port);
    state = State::kRunning;
    group = std::make_unique<WorkerGroup>(io, std::move(specs),
                                          StopPolicy{cfg.term_timeout, kKillTimeout}, guardian);
    group->start([this](GroupResult result) { on_group_done(std::move(result)); });
  }

  void on_group_done(GroupResult result) {
    if (interrupted_by != 0) {
      result.outcome = GroupResult::Outcome::kStopped;
      result.stop_signal = interrupted_by;
      print_summary(result);
      finish(128 + interrupted_by);
      return;
    }
    if (result.outcome == GroupResult::Outcome::kSucceeded) {
      state = State::kSucceeded;
      spdlog::info("all {} worker{} exited 0 after {:.2f} s", result.workers.size(),
                   result.workers.size() == 1 ? "" : "s",
                   std::chrono::duration<double>(result.elapsed).count());
      finish(0);
      return;
    }
    const WorkerOutcome& root = result.workers.at(result.root_cause.value_or(0));
    if (restart_count < cfg.max_restarts) {
      ++restart_count;
      spdlog::warn("worker group failed (rank {} {}); restarting all {} workers: restart {} of {}",
                   root.global_rank, root.status.describe(), result.workers.size(), restart_count,
                   cfg.max_restarts);
      state = State::kRestarting;
      rendezvous.async_next_round([this](const Assignment& a) { on_assigned(a); });
      return;
    }
    state = State::kFailed;
    print_summary(result);
    finish(exit_code_for(result));
  }

  void print_summary(const GroupResult& result) {
    std::map<size_t, std::string> messages;
    for (size_t i = 0; i < result.workers.size(); ++i) {
      if (!result.workers[i].error_file.empty())
        messages[i] = read_error_file_message(result.workers[i].error_file);
    }
    std::string table = format_failure_summary(
        result, SummaryContext{assignment.host, assignment.node_rank, restart_count}, messages);
    if (!table.empty() && table.back() == '\n') table.pop_back();
    spdlog::error("{}", table);
  }

  void finish(int code) {
    exit_code = code;
    boost::system::error_code ignored;
    signals.cancel(ignored);
    io.stop();
  }

  static constexpr std::chrono::milliseconds kKillTimeout{5'000};

  asio::io_context& io;
  const LaunchConfig& cfg;
  Rendezvous& rendezvous;
  AgentContext ctx;
  Guardian* guardian;
  asio::signal_set signals;
  State state = State::kInit;
  Assignment assignment;
  std::unique_ptr<WorkerGroup> group;
  int restart_count = 0;
  int interrupted_by = 0;
  int exit_code = 1;
};

LocalAgent::LocalAgent(asio::io_context& io, const LaunchConfig& cfg, Rendezvous& rendezvous,
                       AgentContext context, Guardian* guardian)
    : impl_(std::make_unique<Impl>(io, cfg, rendezvous, std::move(context), guardian)) {}

LocalAgent::~LocalAgent() = default;

int LocalAgent::run() {
  return impl_->run();
}

}  // namespace npu_run
