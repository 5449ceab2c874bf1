// A leader whose etcd lease lapsed for a moment is not deposed on the others' word alone. Its
// renewals may have gone while etcd elected its own leader and hang on a member for good, while
// an agent that joined later renewed through etcd's new leader at once: the leader tries once
// more through every member before it steps down (CI saw a leader leave a job for no reason
// when etcd lost its leader member during the join). Its renewals here go through relays the
// test cuts until the lease lapses, then lets through again: the requests sent meanwhile are
// never answered, those sent afterwards are.
#include <fmt/format.h>

#include <catch2/catch.hpp>
#include <chrono>

#include "support/cut_proxy.hpp"
#include "support/etcd_cluster.hpp"
#include "support/harness.hpp"

namespace test_etcd_leader_lapse {

using namespace npu_run;
using namespace npu_run::testing;
using namespace std::chrono_literals;
using Catch::Matchers::Contains;

TEST_CASE(
    "etcd leader lapse: a leader whose renewals hung while another agent's took tries once more "
    "and leads on",
    "[integration][etcd][kernel-neutral]") {
  EtcdCluster cluster;
  std::vector<std::unique_ptr<CutProxy>> relays;
  std::string relayed;
  for (int m = 0; m < 3; ++m) {
    relays.push_back(std::make_unique<CutProxy>(cluster.client_port(m)));
    relayed += fmt::format("{}127.0.0.1:{}", m == 0 ? "" : ",", relays.back()->port());
  }
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

  for (auto& r : relays) r->cut();
  leader->wait_for_output("etcd lease lapsing", 1, 15s, /*in_stderr=*/true);
  for (auto& r : relays) r->restore();

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

}  // namespace test_etcd_leader_lapse
