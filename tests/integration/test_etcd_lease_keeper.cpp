// The lease keeper against a real etcd (support/etcd_cluster.hpp): a lapse of renewals is said
// before etcd could expire the lease and is not a loss; etcd's own leader lost at any phase of the
// renewal cycle leaves the lease alive at the smallest TTL npu_run accepts. In-process: no npu_run
// for the Linux 3.10 filter to wrap, so [kernel-neutral].
#include <fmt/format.h>

#include <boost/asio/io_context.hpp>
#include <catch2/catch.hpp>
#include <chrono>
#include <string>

#include "etcd/requests.hpp"
#include "support/etcd_caller.hpp"
#include "support/etcd_candidate.hpp"
#include "support/etcd_cluster.hpp"
#include "support/run_until.hpp"

namespace test_etcd_lease_keeper {

using namespace npu_run;
using namespace npu_run::testing;
using namespace std::chrono_literals;
using Catch::Matchers::Contains;

TEST_CASE(
    "etcd lease keeper: cut off from etcd, the owner is told before etcd can expire it, and a "
    "renewal that takes afterwards keeps the lease",
    "[integration][etcd][kernel-neutral]") {
  EtcdCluster cluster(1);
  boost::asio::io_context io;
  Candidate a(io, cluster.endpoints());
  REQUIRE(run_until(
      io, [&] { return a.granted; }, 10s));
  io.run_for(1500ms);  // a few renewals
  io.restart();
  CHECK(a.keeper.healthy());
  const auto cut = std::chrono::steady_clock::now();
  cluster.kill(0);
  // A renewal that fails shows as unhealthy within a renewal period and a twelfth of the TTL.
  REQUIRE(run_until(
      io, [&] { return !a.keeper.healthy(); }, 10s));
  const std::chrono::milliseconds ttl = 2s;
  CHECK(std::chrono::steady_clock::now() - cut < ttl / 3 + ttl / 12 + 100ms);
  REQUIRE(run_until(
      io, [&] { return a.lapsing.has_value(); }, 10s));
  // etcd counts the 2 s from the last renewal it took, no earlier than when it was sent, which
  // was before the cut: the owner heard within the TTL less the margin of the cut.
  CHECK(std::chrono::steady_clock::now() - cut < 2s - a.keeper.margin() + 100ms);
  CHECK_THAT(*a.lapsing, Contains("no renewal of etcd lease"));
  // etcd back at once (its data kept): its new leader extends every lease, so the same lease is
  // renewed again, and nothing was lost.
  cluster.start(0);
  REQUIRE(run_until(
      io, [&] { return a.renewals_after_lapse == 1 || a.lost.has_value(); }, 20s));
  CHECK_FALSE(a.lost.has_value());
  CHECK_FALSE(a.keeper.lapsed());
  REQUIRE(run_until(
      io, [&] { return a.keeper.healthy(); }, 5s));
}

// etcd's leader member SIGKILLed at different moments of the renewal cycle, at the smallest TTL
// npu_run accepts: etcd elects a new leader (1-2 s), which extends every lease; the renewals
// that wait for it or follow it keep the lease. It may lapse for a moment, never be lost.
TEST_CASE("etcd lease keeper: etcd's leader member lost, the lease lives on at the smallest TTL",
          "[integration][etcd][kernel-neutral]") {
  EtcdCluster cluster;
  boost::asio::io_context io;
  Candidate a(io, cluster.endpoints());
  REQUIRE(run_until(
      io, [&] { return a.granted; }, 10s));
  EtcdCaller etcd(cluster.endpoints());
  for (const auto offset : {0ms, 250ms, 500ms}) {
    io.run_for(1s + offset);
    io.restart();
    const int leader = cluster.leader();
    REQUIRE(leader >= 0);
    cluster.kill(leader);
    io.run_for(5s);  // etcd's election (1-2 s), then renewals for longer than the TTL
    io.restart();
    INFO("offset " << offset.count() << " ms, lapses " << a.lapses);
    REQUIRE_FALSE(a.lost.has_value());
    CHECK(a.renewals_after_lapse == a.lapses);
    CHECK(a.keeper.healthy());
    CHECK(etcd::lease_result(etcd.ok("/v3/lease/timetolive", etcd::lease_id_request(a.keeper.id())))
              .ttl > 0);
    cluster.start(leader);
  }
}

// The member the renewals go to frozen (SIGSTOP: its sockets open, nothing answered), with the
// agents' own 3 s timeout, longer than the TTL: every renewal sent one at a time hangs on it,
// the lease lapses, and the renewal sent to every member at the lapse keeps it through the
// others. A leader renewing this way once concluded it alone was cut off, while the other agents
// renewed through the members that answer.
TEST_CASE(
    "etcd lease keeper: renewals hung on a frozen member, the lease is kept through the others",
    "[integration][etcd][kernel-neutral]") {
  EtcdCluster cluster;
  boost::asio::io_context io;
  Candidate a(io, cluster.endpoints(), 3s);
  REQUIRE(run_until(
      io, [&] { return a.granted; }, 10s));
  io.run_for(1s);
  io.restart();
  const int frozen = static_cast<int>(a.client.member_index());
  cluster.freeze(frozen);
  REQUIRE(run_until(
      io, [&] { return a.renewals_after_lapse >= 1 || a.lost.has_value(); }, 10s));
  INFO("frozen member " << frozen << ", lapses " << a.lapses);
  REQUIRE_FALSE(a.lost.has_value());
  CHECK(a.client.member_index() != static_cast<size_t>(frozen));
  io.run_for(3s);  // renewing through the members that answer, not lapsing again
  io.restart();
  CHECK_FALSE(a.lost.has_value());
  CHECK(a.keeper.healthy());
  // Asked of the members that answered all along, before the frozen one is thawed: a thawed
  // member that led etcd before its freeze answers from its stale lessor for a moment.
  std::string answering;
  for (int m = 0; m < 3; ++m) {
    if (m != frozen)
      answering +=
          (answering.empty() ? "" : ",") + fmt::format("127.0.0.1:{}", cluster.client_port(m));
  }
  EtcdCaller etcd(answering);
  CHECK(etcd::lease_result(etcd.ok("/v3/lease/timetolive", etcd::lease_id_request(a.keeper.id())))
            .ttl > 0);
  cluster.thaw(frozen);
}

}  // namespace test_etcd_lease_keeper
