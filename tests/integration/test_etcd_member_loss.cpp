// What the loss of one etcd member costs a job on the etcd rendezvous: nothing. etcd's own
// leader member and a follower are SIGKILLed during the join, right after the round formed and
// during the run, at the default lease and at the smallest one npu_run accepts (2 s, under the
// 1-2 s etcd takes to elect a new leader); every agent ends 0, with no new rendezvous leader, no
// re-form and no restart. Tagged [kernel-neutral]: what it checks is the etcd client's renewals
// and elections, user-space work no system call of the Linux 3.10 filter touches (the etcd cases
// of test_etcd_rendezvous.cpp run under the filter).
#include <fmt/format.h>

#include <catch2/catch.hpp>
#include <chrono>
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

// One job: two agents, one etcd member SIGKILLed at `moment`; it must not notice.
void lose_one_member(EtcdCluster& cluster, int ttl, Moment moment, bool etcd_leader) {
  const int lease = ttl == 0 ? 5 : ttl;
  const std::string run_id = fmt::format("loss-{}-{}-{}", lease, static_cast<int>(moment),
                                         etcd_leader ? "leader" : "follower");
  const int leader = cluster.leader();
  REQUIRE(leader >= 0);
  const int victim = etcd_leader ? leader : (leader + 1) % 3;
  // The run outlives etcd's election and then more than a lease of renewals.
  const int work = lease + 5;
  auto first = agent(cluster, run_id, ttl, work);
  first->wait_for_output("etcd elected this agent", 1, 30s, /*in_stderr=*/true);
  if (moment == Moment::kJoin) cluster.kill(victim);
  auto second = agent(cluster, run_id, ttl, work);
  first->wait_for_output("restart=0", 1, 30s);
  second->wait_for_output("restart=0", 1, 30s);
  if (moment == Moment::kRun) std::this_thread::sleep_for(2s);
  if (moment != Moment::kJoin) cluster.kill(victim);
  const auto finished = NpuRunProcess::wait_all({first.get(), second.get()}, 90s);
  for (const Finished& f : finished) {
    INFO("lease " << lease << " s, etcd " << (etcd_leader ? "leader" : "follower")
                  << " member lost " << name(moment) << "\n"
                  << f.out << f.err);
    CHECK(f.exit_code == 0);
    CHECK_THAT(f.out, !Contains("restart=1"));
    CHECK_THAT(f.err, !Contains("lead the rendezvous after") && !Contains("rejoins the job") &&
                          !Contains("leaves the job"));
    // A 2 s lease may lapse for a moment while etcd elects its leader; it is said, and then
    // that the same lease was renewed. The default lease does not.
    if (ttl == 0) CHECK_THAT(f.err, !Contains("failover is off"));
    if (f.err.find("failover is off") != std::string::npos) {
      CHECK(f.err.rfind("failover is on again") > f.err.rfind("failover is off"));
    }
  }
  require_no_strays(*first);
  require_no_strays(*second);
  restart_member(cluster, victim);
}

void each_member_at_each_moment(int ttl) {
  EtcdCluster cluster;
  for (const Moment moment : {Moment::kJoin, Moment::kFormed, Moment::kRun}) {
    for (const bool etcd_leader : {true, false}) lose_one_member(cluster, ttl, moment, etcd_leader);
  }
}

}  // namespace

TEST_CASE("etcd member lost: at the default lease, no agent notices",
          "[integration][etcd][kernel-neutral]") {
  each_member_at_each_moment(0);
}

TEST_CASE("etcd member lost: at the smallest lease npu_run accepts, no agent notices",
          "[integration][etcd][kernel-neutral]") {
  each_member_at_each_moment(2);
}

}  // namespace test_etcd_member_loss
