// LocalAgent's event logic with a fake rendezvous and fake workers: what it reports, when it joins
// again, how it stops, and every path to its exit code. No process is started.
#include <boost/asio/io_context.hpp>
#include <catch2/catch.hpp>
#include <csignal>

#include "agent/local_agent.hpp"
#include "basics/exit_status.hpp"
#include "support/temp_dir.hpp"

namespace test_local_agent {

using namespace npu_run;
using npu_run::testing::TempDir;

namespace {

// Records what the agent sends; the test plays the server's part through `handlers`.
class FakeRendezvous : public Rendezvous {
 public:
  void start(Handlers h) override { handlers = std::move(h); }
  void join() override { ++joins; }
  void report(const rdzv::Report& r) override { reports.push_back(r); }
  void send(const rdzv::RoomMessage& m) override {
    if (const auto* health = std::get_if<rdzv::HealthReport>(&m))
      verdicts.push_back(health->verdict);
  }
  void query_status(StatusAsk /*ask*/, std::function<void(StatusAnswer)> done) override {
    done(std::string("no status in this test"));
  }
  void close() override { closed = true; }
  std::string describe() const override { return "fake"; }

  Handlers handlers;
  int joins = 0;
  std::vector<rdzv::Report> reports;
  std::vector<NodeVerdict> verdicts;
  bool closed = false;
};

// One round's workers: records what the agent asks; the test ends the round with a result.
struct FakeWorkers : RoundWorkers {
  void start(DoneHandler on_done) override { done = std::move(on_done); }
  void forward_signal(int sig) override { forwarded.push_back(sig); }
  void stop(int sig) override { stops.push_back(sig); }
  std::vector<pid_t> running_pids() const override { return {4242}; }

  DoneHandler done;
  std::vector<int> forwarded;
  std::vector<int> stops;
};

GroupResult result_of(std::vector<int> exit_codes) {
  GroupResult result;
  for (size_t i = 0; i < exit_codes.size(); ++i) {
    WorkerOutcome w;
    w.local_rank = static_cast<int>(i);
    w.global_rank = static_cast<int>(i);
    w.pid = 100 + static_cast<int>(i);
    w.status = ExitStatus::exited(exit_codes[i]);
    w.finished_at = std::chrono::system_clock::now();
    if (exit_codes[i] != 0 && !result.root_cause) result.root_cause = result.first_exit = i;
    result.workers.push_back(w);
  }
  result.outcome =
      result.root_cause ? GroupResult::Outcome::kFailed : GroupResult::Outcome::kSucceeded;
  return result;
}

GroupResult stopped_by_agent(int sig) {
  GroupResult result = result_of({0, 0});
  for (auto& w : result.workers) {
    w.status = ExitStatus::from_wait_status(sig);  // a raw wait status: killed by `sig`
    w.stopped_by_agent = true;
  }
  result.outcome = GroupResult::Outcome::kStopped;
  result.stop_signal = sig;
  return result;
}

// An agent of one node with two workers, wired to fakes.
struct Harness {
  Harness() {
    cfg.shape.nproc_per_node = 2;
    cfg.shape.devices = {0, 1};
    cfg.worker.program = "/bin/true";
    cfg.supervision.max_restarts = 3;
    cfg.supervision.stop_signals = {SIGTERM, SIGINT, SIGHUP, SIGQUIT};  // the parser's default
    AgentContext ctx;
    ctx.host = "h0";
    ctx.run_dir = dir.path();
    ctx.make_workers = [this](const std::vector<WorkerSpec>& specs, StopPolicy) {
      auto w = std::make_unique<FakeWorkers>();
      rounds.push_back(w.get());
      round_sizes.push_back(specs.size());
      return w;
    };
    agent = std::make_unique<LocalAgent>(io, cfg, rendezvous, std::move(ctx), nullptr);
    agent->start([this](int code) { exit_code = code; });
  }

  Assignment assignment(uint64_t round, int restart_count) const {
    Assignment a;
    a.round = round;
    a.restart_count = restart_count;
    a.world_size = 2;
    a.host = "h0";
    a.worker_master_addr = "127.0.0.1";
    a.worker_master_port = 29400;
    return a;
  }
  void assign(uint64_t round, int restart_count = 0) {
    rendezvous.handlers.assigned(assignment(round, restart_count));
  }
  FakeWorkers& current() { return *rounds.back(); }
  void end_round(GroupResult result) {
    current().done(std::move(result));
    io.poll();
  }
  void decide(rdzv::Action action, int code, bool membership = false) {
    rdzv::Decision d;
    d.round = rendezvous.reports.empty() ? 0 : rendezvous.reports.back().round;
    d.action = action;
    d.exit_code = code;
    d.membership_change = membership;
    if (!rendezvous.reports.empty()) d.root_cause = rendezvous.reports.back().failure;
    rendezvous.handlers.message(d);
    io.poll();
  }

  TempDir dir;
  boost::asio::io_context io;
  LaunchConfig cfg;
  FakeRendezvous rendezvous;
  std::vector<FakeWorkers*> rounds;  // owned by the agent while their round runs
  std::vector<size_t> round_sizes;
  std::unique_ptr<LocalAgent> agent;
  std::optional<int> exit_code;
};

}  // namespace

TEST_CASE("local agent: workers that all exit 0 are reported, and the decision's 0 is the exit",
          "[unit][agent]") {
  Harness h;
  CHECK(h.rendezvous.joins == 1);
  h.assign(0);
  REQUIRE(h.rounds.size() == 1);
  CHECK(h.round_sizes[0] == 2);
  h.end_round(result_of({0, 0}));
  REQUIRE(h.rendezvous.reports.size() == 1);
  CHECK(h.rendezvous.reports[0].outcome == rdzv::Outcome::kSucceeded);
  CHECK_FALSE(h.exit_code);  // the job's decision, not this node's result, ends it
  h.decide(rdzv::Action::kFinish, 0);
  CHECK(h.exit_code == 0);
  CHECK(h.rendezvous.closed);
}

TEST_CASE("local agent: a failure is reported with its exit code, and a restart joins again",
          "[unit][agent]") {
  Harness h;
  h.assign(0);
  h.end_round(result_of({0, 3}));
  REQUIRE(h.rendezvous.reports.size() == 1);
  const rdzv::Report& failed = h.rendezvous.reports[0];
  CHECK(failed.outcome == rdzv::Outcome::kFailed);
  REQUIRE(failed.failure);
  CHECK(failed.failure->exit_code == 3);
  CHECK(failed.failure->local_rank == 1);
  h.decide(rdzv::Action::kRestart, 0);
  CHECK(h.rendezvous.joins == 2);
  h.assign(1, 1);
  REQUIRE(h.rounds.size() == 2);  // a new round of workers
  h.end_round(result_of({0, 0}));
  h.decide(rdzv::Action::kFinish, 0);
  CHECK(h.exit_code == 0);
}

TEST_CASE("local agent: the job's exit code is the decision's, after the last restart",
          "[unit][agent]") {
  Harness h;
  h.assign(0);
  h.end_round(result_of({7, 0}));
  h.decide(rdzv::Action::kFinish, 7);
  CHECK(h.exit_code == 7);
}

TEST_CASE("local agent: a re-form stops the workers without a failure and joins the new round",
          "[unit][agent]") {
  Harness h;
  h.assign(0);
  h.rendezvous.handlers.message(rdzv::Reform{0, "h1", -1, "a node joined"});
  CHECK(h.current().stops == std::vector<int>{SIGTERM});
  h.end_round(stopped_by_agent(SIGTERM));
  REQUIRE(h.rendezvous.reports.size() == 1);
  CHECK(h.rendezvous.reports[0].outcome == rdzv::Outcome::kStopped);
  CHECK_FALSE(h.rendezvous.reports[0].failure);
  h.decide(rdzv::Action::kRestart, 0, true);
  CHECK(h.rendezvous.joins == 2);
  CHECK_FALSE(h.exit_code);
}

TEST_CASE("local agent: another node's failure stops this node's workers once", "[unit][agent]") {
  Harness h;
  h.assign(0);
  rdzv::FailureReport remote;
  remote.host = "h1";
  remote.node_rank = 1;
  remote.exit_code = 9;
  remote.description = "exit code 9";
  h.rendezvous.handlers.message(rdzv::StopWorkers{0, remote});
  h.rendezvous.handlers.message(rdzv::StopWorkers{0, remote});  // the first reason stands
  CHECK(h.current().stops == std::vector<int>{SIGTERM});
  h.end_round(stopped_by_agent(SIGTERM));
  CHECK(h.rendezvous.reports.at(0).outcome == rdzv::Outcome::kStopped);
  h.decide(rdzv::Action::kFinish, 9);
  CHECK(h.exit_code == 9);
}

TEST_CASE("local agent: a stop signal while waiting for the rendezvous leaves at once",
          "[unit][agent]") {
  Harness h;
  h.agent->handle_signal(SIGTERM);
  h.io.poll();
  CHECK(h.exit_code == exit_for_signal(SIGTERM));
  CHECK(h.rounds.empty());
  h.assign(0);  // too late: no worker starts
  CHECK(h.rounds.empty());
}

TEST_CASE("local agent: a stop signal stops the workers, a second escalates, and 128+signal",
          "[unit][agent]") {
  Harness h;
  h.assign(0);
  h.agent->handle_signal(SIGINT);
  h.agent->handle_signal(SIGINT);
  CHECK(h.current().stops == std::vector<int>{SIGINT, SIGINT});
  h.end_round(stopped_by_agent(SIGINT));
  REQUIRE(h.rendezvous.reports.size() == 1);
  CHECK(h.rendezvous.reports[0].outcome == rdzv::Outcome::kStopped);
  CHECK(h.rendezvous.reports[0].stop_signal == SIGINT);
  CHECK(h.exit_code == exit_for_signal(SIGINT));
}

TEST_CASE("local agent: SIGUSR1 is forwarded and the job goes on", "[unit][agent]") {
  Harness h;
  h.assign(0);
  h.agent->handle_signal(SIGUSR1);
  CHECK(h.current().forwarded == std::vector<int>{SIGUSR1});
  CHECK(h.current().stops.empty());
  CHECK_FALSE(h.exit_code);
}

TEST_CASE("local agent: a rendezvous lost while waiting exits with the rendezvous code",
          "[unit][agent]") {
  Harness h;
  h.rendezvous.handlers.failed("the rendezvous server went silent");
  h.io.poll();
  CHECK(h.exit_code == kExitRendezvous);
}

TEST_CASE("local agent: a rendezvous lost mid-run stops the workers, then the same code",
          "[unit][agent]") {
  Harness h;
  h.assign(0);
  h.rendezvous.handlers.failed("lost the connection");
  CHECK(h.current().stops == std::vector<int>{SIGTERM});
  CHECK_FALSE(h.exit_code);
  h.end_round(stopped_by_agent(SIGTERM));
  CHECK(h.exit_code == kExitRendezvous);
}

}  // namespace test_local_agent
