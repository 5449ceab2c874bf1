// What the loss of one etcd member costs a job on the etcd rendezvous: nothing. etcd's own
// leader member and a follower are SIGKILLed, each once while three jobs stand during the join,
// right after their round formed and during the run, at the default lease and at the smallest
// one npu_run accepts (2 s, under the 1-2 s etcd takes to elect a new leader); every agent ends
// 0, with no new rendezvous leader, no re-form and no restart. Tagged [kernel-neutral]: what it
// checks is the etcd client's renewals and elections, user-space work no system call of the
// Linux 3.10 filter touches (the etcd cases of test_etcd_rendezvous.cpp run under the filter).
#include <fmt/format.h>
#include <signal.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <nlohmann/json.hpp>
#include <thread>

#include "support/etcd_caller.hpp"
#include "support/etcd_cluster.hpp"
#include "support/harness.hpp"
#include "support/run_until.hpp"

namespace test_etcd_member_loss {

using namespace npu_run;
using namespace npu_run::testing;
using namespace std::chrono_literals;
using Catch::Matchers::Contains;

namespace {

enum class Moment { kJoin, kFormed, kRun };
const char* name(Moment m) {
  return m == Moment::kJoin     ? "during the join"
         : m == Moment::kFormed ? "as the round formed"
                                : "during the run";
}

std::unique_ptr<NpuRunProcess> agent(const EtcdCluster& cluster, const std::string& run_id, int ttl,
                                     int work_seconds) {
  std::vector<std::string> args = {
      "--nnodes",
      "2",
      "--nproc-per-node",
      "1",
      "--rdzv-backend",
      "etcd",
      "--rdzv-endpoint",
      cluster.endpoints(),
      "--rdzv-id",
      run_id,
      "--heartbeat-interval",
      "0.2",
      "--no-python",
      "/bin/sh",
      "-c",
      fmt::format("echo \"rank=$RANK restart=$TORCHELASTIC_RESTART_COUNT\"; sleep {}",
                  work_seconds)};
  if (ttl != 0) args.insert(args.begin(), {"--rdzv-conf", fmt::format("lease_ttl={}", ttl)});
  return std::make_unique<NpuRunProcess>(args);
}

// A member brought back takes writes again before the next one is lost (a quorum of two).
void restart_member(EtcdCluster& cluster, int member) {
  cluster.start(member);
  EtcdCaller etcd(cluster.client_settings(member));
  const auto until = std::chrono::steady_clock::now() + 20s;
  while (std::chrono::steady_clock::now() < until) {
    const etcd::Reply r = etcd.call("/v3/kv/put", etcd::put_request("/ready", "1"));
    if (std::holds_alternative<etcd::Json>(r)) return;
    std::this_thread::sleep_for(200ms);
  }
  FAIL("etcd member " << member << " did not come back:\n" << cluster.log(member));
}

// Two agents of one job, and the moment of the job at which etcd loses a member.
struct Job {
  Moment moment;
  std::string id;
  std::unique_ptr<NpuRunProcess> first, second;
};

// What a job may not notice of the loss.
void check_unnoticed(const Job& job, const Finished& f, int ttl, bool etcd_leader) {
  INFO("lease " << (ttl == 0 ? 5 : ttl) << " s, etcd " << (etcd_leader ? "leader" : "follower")
                << " member lost " << name(job.moment) << "\n"
                << f.out << f.err);
  CHECK(f.exit_code == 0);
  CHECK_THAT(f.out, !Contains("restart=1"));
  CHECK_THAT(f.err, !Contains("lead the rendezvous after") && !Contains("rejoins the job") &&
                        !Contains("leaves the job"));
  // A 2 s lease may lapse for a moment while etcd elects its leader; it is said, and then that
  // the same lease was renewed. The default lease does not.
  if (ttl == 0) CHECK_THAT(f.err, !Contains("failover is off"));
  if (f.err.find("failover is off") != std::string::npos) {
    CHECK(f.err.rfind("failover is on again") > f.err.rfind("failover is off"));
  }
}

// One etcd member SIGKILLed once, while three jobs stand at the three moments: one runs (for 2 s
// already), one's round has just formed, one has a single agent in (its second starts after).
void lose_one_member(EtcdCluster& cluster, int ttl, bool etcd_leader) {
  const int lease = ttl == 0 ? 5 : ttl;
  const int leader = cluster.leader();
  REQUIRE(leader >= 0);
  const int victim = etcd_leader ? leader : (leader + 1) % 3;
  const int work = lease + 6;  // outlives etcd's election and then more than a lease of renewals
  std::vector<Job> jobs;
  jobs.reserve(3);
  for (const Moment moment : {Moment::kRun, Moment::kFormed, Moment::kJoin}) {
    Job& job = jobs.emplace_back();
    job.moment = moment;
    job.id = fmt::format("loss-{}-{}-{}", lease, static_cast<int>(moment),
                         etcd_leader ? "leader" : "follower");
    job.first = agent(cluster, job.id, ttl, work);
    job.first->wait_for_output("etcd elected this agent", 1, 30s, /*in_stderr=*/true);
    if (moment == Moment::kJoin) break;
    job.second = agent(cluster, job.id, ttl, work);
    for (auto* a : {job.first.get(), job.second.get()}) a->wait_for_output("restart=0", 1, 30s);
    if (moment == Moment::kRun) std::this_thread::sleep_for(2s);
  }
  cluster.kill(victim);
  jobs.back().second = agent(cluster, jobs.back().id, ttl, work);
  for (Job& job : jobs) {
    const auto finished = NpuRunProcess::wait_all({job.first.get(), job.second.get()}, 90s);
    for (const Finished& f : finished) check_unnoticed(job, f, ttl, etcd_leader);
    require_no_strays(*job.first);
    require_no_strays(*job.second);
  }
  restart_member(cluster, victim);
}

void each_member_at_each_moment(int ttl) {
  EtcdCluster cluster;
  for (const bool etcd_leader : {true, false}) lose_one_member(cluster, ttl, etcd_leader);
}

}  // namespace

TEST_CASE("etcd member lost: at the default lease, no agent notices",
          "[integration][etcd][kernel-neutral][etcd-faults]") {
  each_member_at_each_moment(0);
}

TEST_CASE("etcd member lost: at the smallest lease npu_run accepts, no agent notices",
          "[integration][etcd][kernel-neutral][etcd-faults]") {
  each_member_at_each_moment(2);
}

// Every member frozen (SIGSTOP) for longer than the lease, then resumed: etcd expires every
// lease at once. Each agent rejoins with a new one; whoever etcd elects, the job re-forms at
// most once, and the agent that led rejoins as a member when another was elected: every agent
// ends 0, none by a signal.
TEST_CASE("etcd frozen whole for longer than the lease: at most one re-form, no agent lost",
          "[integration][etcd]") {
  EtcdCluster cluster;
  const std::string worker =
      "echo \"rank=$RANK restart=$TORCHELASTIC_RESTART_COUNT\"; "
      "if [ \"$TORCHELASTIC_RESTART_COUNT\" = 0 ]; then sleep 14; else sleep 2; fi";
  std::vector<std::unique_ptr<NpuRunProcess>> agents;
  for (int i = 0; i < 3; ++i) {
    agents.push_back(std::make_unique<NpuRunProcess>(std::vector<std::string>{
        "--nnodes", "2:3", "--nproc-per-node", "1", "--rdzv-backend", "etcd", "--rdzv-endpoint",
        cluster.endpoints(), "--rdzv-id", "frozen", "--rdzv-conf", "lease_ttl=2",
        "--heartbeat-interval", "0.2", "--no-python", "/bin/sh", "-c", worker}));
  }
  for (auto& a : agents) a->wait_for_output("restart=0", 1, 30s);
  std::this_thread::sleep_for(1s);
  for (int m = 0; m < 3; ++m) cluster.freeze(m);
  std::this_thread::sleep_for(2s + 3s);
  for (int m = 0; m < 3; ++m) cluster.thaw(m);
  std::vector<NpuRunProcess*> all;
  for (auto& a : agents) all.push_back(a.get());
  const auto finished = NpuRunProcess::wait_all(all, 90s);
  std::string everything;
  for (const Finished& f : finished) {
    INFO(f.out << f.err);
    CHECK(f.exit_code == 0);
    CHECK(f.term_signal == 0);
    CHECK_THAT(f.out, !Contains("restart=2"));
    CHECK_THAT(f.err, !Contains("leaves the job"));
    everything += f.out + f.err;
  }
  INFO(everything);
  // Another agent elected: the one that led said it rejoins, and the job went on once.
  if (everything.find("lead the rendezvous after") != std::string::npos) {
    CHECK_THAT(everything, Contains("it stops serving and rejoins the job as a member"));
  }
  for (auto& a : agents) require_no_strays(*a);
}

// etcd gone for good, and then a node lost: the leader, whose lease is in doubt, holds the
// departure for as long as a new leader would take to be named, and then the job hears of it.
TEST_CASE("etcd gone for good: a node lost afterwards still ends the job, within the lease and 3 s",
          "[integration][etcd][kernel-neutral]") {
  EtcdCluster cluster;
  std::vector<std::unique_ptr<NpuRunProcess>> agents;
  for (int i = 0; i < 2; ++i) agents.push_back(agent(cluster, "gone-for-good", 2, 60));
  for (auto& a : agents) a->wait_for_output("restart=0", 1, 30s);
  EtcdCaller etcd(cluster.endpoints());
  const auto leader = etcd.range("/torchelastic/p2p/gone-for-good/leader", false);
  REQUIRE(leader.size() == 1);
  const int leader_pid = nlohmann::json::parse(leader.front().value)["pid"].get<int>();
  NpuRunProcess& led = agents[0]->pid() == leader_pid ? *agents[0] : *agents[1];
  NpuRunProcess& follower = agents[0]->pid() == leader_pid ? *agents[1] : *agents[0];
  for (int m = 0; m < 3; ++m) cluster.kill(m);
  led.wait_for_output("failover is off until etcd answers again", 1, 10s, /*in_stderr=*/true);
  follower.send_signal(SIGKILL);
  const auto killed = std::chrono::steady_clock::now();
  const Finished f = led.wait(30s);
  INFO(f.out << f.err);
  CHECK(f.exit_code == 125);
  CHECK(std::chrono::steady_clock::now() - killed < 2s + 3s + 3s);
  CHECK_THAT(f.err, Contains("agent lost"));
  require_no_strays(led);
  require_no_strays(follower);
}

// Before a job relies on etcd, --dry-run and `npu_run doctor` ask each member whether it answers.
TEST_CASE("etcd members asked: --dry-run and doctor say which answer and which is etcd's leader",
          "[integration][etcd][kernel-neutral]") {
  EtcdCluster cluster;
  const int leader = cluster.leader();
  REQUIRE(leader >= 0);
  const int lost = (leader + 1) % 3;
  cluster.kill(lost);
  const std::string silent = fmt::format("127.0.0.1:{}", cluster.client_port(lost));
  const std::string answering = fmt::format("127.0.0.1:{}", cluster.client_port(leader));
  Finished f = run_npu_run({"--dry-run", "--nnodes", "2", "--rdzv-backend", "etcd",
                            "--rdzv-endpoint", cluster.endpoints(), "--no-python", "/bin/true"});
  INFO(f.out << f.err);
  CHECK(f.exit_code == 0);
  CHECK_THAT(f.out, Contains(answering + " answers (etcd 3.") && Contains("its leader") &&
                        Contains(silent + " does not answer (Connection refused)"));
  // A minority silent: a warning, the job would run.
  f = run_npu_run({"doctor", "--rdzv-backend", "etcd", "--rdzv-endpoint", cluster.endpoints()});
  INFO(f.out << f.err);
  CHECK(f.exit_code == 0);
  CHECK_THAT(f.out, Contains("[ ok ] etcd member " + answering + ": answers: etcd 3.") &&
                        Contains("(etcd's leader)") &&
                        Contains("[warn] etcd member " + silent + ": does not answer") &&
                        Contains("fix: check --rdzv-endpoint and that etcd listens on " + silent));
  // A majority silent: the job could not start; the doctor fails.
  cluster.kill(leader);
  f = run_npu_run({"doctor", "--rdzv-backend", "etcd", "--rdzv-endpoint", cluster.endpoints()});
  CHECK(f.exit_code == 1);
  CHECK_THAT(f.out, Contains("[fail] etcd member " + silent));
}

}  // namespace test_etcd_member_loss
