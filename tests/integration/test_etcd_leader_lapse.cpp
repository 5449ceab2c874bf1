// When the etcd lease of the rendezvous' leader lapses. etcd lost entirely: the job finishes
// over TCP with failover off, and the leases etcd kept lapse afterwards. A leader cut off from
// etcd alone steps down before a new leader's round starts. And a leader is not deposed on the
// others' word alone: its renewals may have gone while etcd elected its own leader and hang on
// a member for good, while an agent that joined later renewed through etcd's new leader at
// once; it tries once more through every member before it steps down (CI saw a leader leave a
// job for no reason when etcd lost its leader member during the join). Its renewals there go
// through relays the test cuts until the lease lapses, then lets through again: the requests
// sent meanwhile are never answered, those sent afterwards are.
#include <fmt/format.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <thread>

#include "support/cut_proxy.hpp"
#include "support/etcd_caller.hpp"
#include "support/etcd_cluster.hpp"
#include "support/harness.hpp"

namespace test_etcd_leader_lapse {

using namespace npu_run;
using namespace npu_run::testing;
using namespace std::chrono_literals;
using Catch::Matchers::Contains;

namespace {

// A relay to each member of `cluster` that the test can cut (support/cut_proxy.hpp), and the
// endpoints through them: how one agent reaches etcd while the others reach it directly.
struct Relays {
  explicit Relays(const EtcdCluster& cluster) {
    for (int m = 0; m < 3; ++m) {
      each.push_back(std::make_unique<CutProxy>(cluster.client_port(m)));
      endpoints += fmt::format("{}127.0.0.1:{}", m == 0 ? "" : ",", each.back()->port());
    }
  }
  std::vector<std::unique_ptr<CutProxy>> each;
  std::string endpoints;
};

}  // namespace

TEST_CASE(
    "etcd leader lapse: a leader whose renewals hung while another agent's took tries once more "
    "and leads on",
    "[integration][etcd][kernel-neutral]") {
  EtcdCluster cluster;
  Relays relays(cluster);
  const std::string& relayed = relays.endpoints;
  // A 6 s lease: the leader says its lease is lapsing at 5 s and decides 0.75 s later (a
  // heartbeat and a half), time enough for the test to open the relays in between.
  const auto agent = [&](const std::string& endpoints) {
    return std::make_unique<NpuRunProcess>(std::vector<std::string>{
        "--nnodes",
        "2",
        "--nproc-per-node",
        "1",
        "--rdzv-backend",
        "etcd",
        "--rdzv-endpoint",
        endpoints,
        "--rdzv-id",
        "lapse",
        "--rdzv-conf",
        "lease_ttl=6",
        "--heartbeat-interval",
        "0.5",
        "--log-level",
        "debug",
        "--no-python",
        "/bin/sh",
        "-c",
        "echo \"rank=$RANK restart=$TORCHELASTIC_RESTART_COUNT\"; sleep 14"});
  };
  auto leader = agent(relayed);
  leader->wait_for_output("etcd elected this agent", 1, 30s, /*in_stderr=*/true);
  auto member = agent(cluster.endpoints());
  for (auto* a : {leader.get(), member.get()}) a->wait_for_output("restart=0", 1, 30s);

  for (auto& r : relays.each) r->cut();
  leader->wait_for_output("etcd lease lapsing", 1, 15s, /*in_stderr=*/true);
  for (auto& r : relays.each) r->restore();

  const auto finished = NpuRunProcess::wait_all({leader.get(), member.get()}, 60s);
  for (const Finished& f : finished) {
    INFO(f.out << f.err);
    CHECK(f.exit_code == 0);
    CHECK_THAT(f.out, !Contains("restart=1"));
    CHECK_THAT(f.err, !Contains("leaves the job") && !Contains("lead the rendezvous after"));
  }
  require_no_strays(*leader);
  require_no_strays(*member);
}

TEST_CASE("etcd rendezvous: etcd lost entirely during the job -> the job finishes, failover off",
          "[integration][etcd]") {
  EtcdCluster cluster;
  std::vector<std::unique_ptr<NpuRunProcess>> agents;
  for (int i = 0; i < 2; ++i)
    agents.push_back(std::make_unique<NpuRunProcess>(
        std::vector<std::string>{"--nnodes",
                                 "2",
                                 "--nproc-per-node",
                                 "1",
                                 "--rdzv-backend",
                                 "etcd",
                                 "--rdzv-endpoint",
                                 cluster.endpoints(),
                                 "--rdzv-id",
                                 "gone",
                                 "--rdzv-conf",
                                 "lease_ttl=2",
                                 "--heartbeat-interval",
                                 "0.2",
                                 "--heartbeat-timeout",
                                 "3",
                                 "--no-python",
                                 "/bin/sh",
                                 "-c",
                                 "echo \"restart=$TORCHELASTIC_RESTART_COUNT\"; sleep 6"}));
  for (auto& a : agents) a->wait_for_output("restart=0", 1, 30s);
  for (int m = 0; m < 3; ++m) cluster.kill(m);
  std::vector<NpuRunProcess*> all{agents[0].get(), agents[1].get()};
  const auto finished = NpuRunProcess::wait_all(all, 60s);
  for (const Finished& f : finished) {
    INFO(f.out << f.err);
    CHECK(f.exit_code == 0);
    CHECK_THAT(f.out, !Contains("restart=1"));
    CHECK_THAT(f.err, Contains("failover is off until etcd answers again"));
  }
  CHECK_THAT(finished[0].err + finished[1].err, Contains("no agent of the job reaches etcd"));
  for (auto& a : agents) require_no_strays(*a);
  // etcd back: the leases it kept lapse with their TTL, and the job's keys with them.
  for (int m = 0; m < 3; ++m) cluster.start(m);
  EtcdCaller etcd(cluster.endpoints(), 3s);
  const auto left = [&] {  // the job's keys, or 1 while etcd is still starting
    const etcd::Reply reply =
        etcd.call("/v3/kv/range", etcd::range_request("/torchelastic/p2p/gone/", true));
    const auto* answer = std::get_if<etcd::Json>(&reply);
    return answer == nullptr ? size_t{1} : etcd::range_kvs(*answer).size();
  };
  const auto until = std::chrono::steady_clock::now() + 20s;
  while (left() != 0 && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(200ms);
  CHECK(etcd.range("/torchelastic/p2p/gone/", true).empty());
}

TEST_CASE(
    "etcd rendezvous: a leader cut off from etcd alone steps down before a new leader's "
    "round starts",
    "[integration][etcd]") {
  EtcdCluster cluster;
  // The leader-to-be reaches etcd through relays the test can cut; the other directly.
  Relays relays(cluster);
  const std::string& relayed = relays.endpoints;
  // Each worker stamps its start and its stop (the wall clock, shared by both agents here).
  const std::string worker =
      "echo \"start restart=$TORCHELASTIC_RESTART_COUNT at $(date +%s.%N)\"; "
      "trap 'echo \"stop at $(date +%s.%N)\"; exit 143' TERM; "
      "if [ \"$TORCHELASTIC_RESTART_COUNT\" = 0 ]; then sleep 60 & wait; else sleep 1; fi";
  const auto agent = [&](const std::string& endpoints) {
    return std::make_unique<NpuRunProcess>(std::vector<std::string>{
        "--nnodes", "1:2", "--nproc-per-node", "1", "--max-restarts", "1", "--rdzv-backend", "etcd",
        "--rdzv-endpoint", endpoints, "--rdzv-id", "brain", "--rdzv-conf",
        "lease_ttl=3,last_call_timeout=5", "--no-python", "/bin/sh", "-c", worker});
  };
  auto cut_off = agent(relayed);
  cut_off->wait_for_output("etcd elected this agent", 1, 30s, true);
  auto other = agent(cluster.endpoints());
  cut_off->wait_for_output("start restart=0", 1, 30s);
  other->wait_for_output("start restart=0", 1, 30s);

  for (auto& r : relays.each) r->cut();
  const Finished deposed = cut_off->wait(30s);
  const Finished went_on = other->wait(60s);
  INFO(deposed.out << deposed.err << went_on.out << went_on.err);
  CHECK(deposed.exit_code == 125);
  CHECK_THAT(deposed.err, Contains("it stops its workers and leaves the job") &&
                              Contains("while other agents can"));
  CHECK(went_on.exit_code == 0);
  CHECK_THAT(went_on.err, Contains("etcd elected this agent to lead the rendezvous after"));
  // No two leaders' workers at once: the deposed leader's worker stopped before the new
  // leader's round started its worker.
  const auto stamp = [](const std::string& out, const std::string& what) {
    const auto at = out.find(what);
    REQUIRE(at != std::string::npos);
    return std::stod(out.substr(at + what.size()));
  };
  CHECK(stamp(deposed.out, "stop at ") < stamp(went_on.out, "start restart=1 at "));
  require_no_strays(*cut_off);
  require_no_strays(*other);
}

}  // namespace test_etcd_leader_lapse
