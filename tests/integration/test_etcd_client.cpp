// The etcd layer against a real 3-member etcd cluster (support/etcd_cluster.hpp): what the
// etcd rendezvous relies on, checked on the server it will run against: reads, the create-if-
// absent election and its epoch, writes fenced by the epoch, leases that lapse, failover across
// members, a member that never answers, logins. Every case runs in this process, with no npu_run
// to put behind the Linux 3.10 filter: each is [kernel-neutral].
#include <fmt/format.h>
#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <catch2/catch.hpp>
#include <functional>
#include <optional>
#include <thread>

#include "etcd/client.hpp"
#include "etcd/election.hpp"
#include "etcd/lease_keeper.hpp"
#include "etcd/watch.hpp"
#include "support/etcd_caller.hpp"
#include "support/etcd_candidate.hpp"
#include "support/etcd_cluster.hpp"
#include "support/fixtures.hpp"
#include "support/run_until.hpp"
#include "support/silent_listener.hpp"

namespace test_etcd_client {

using namespace npu_run;
using namespace npu_run::testing;
using namespace std::chrono_literals;
using Catch::Matchers::Contains;

TEST_CASE("etcd client: keys, prefixes and deletes on a 3-member cluster",
          "[integration][etcd][kernel-neutral]") {
  EtcdCluster cluster;
  EtcdCaller etcd(cluster.endpoints());
  etcd.ok("/v3/kv/put", etcd::put_request("/job/a/x", "1"));
  etcd.ok("/v3/kv/put", etcd::put_request("/job/a/y", "2"));
  etcd.ok("/v3/kv/put", etcd::put_request("/job/ab", "3"));  // not under "/job/a/"
  const auto kvs = etcd.range("/job/a/", true);
  REQUIRE(kvs.size() == 2);
  CHECK(kvs[0].key == "/job/a/x");
  CHECK(kvs[1].value == "2");
  CHECK(etcd.range("/job/none", false).empty());
  etcd.ok("/v3/kv/deleterange", etcd::delete_request("/job/a/", true));
  CHECK(etcd.range("/job/a/", true).empty());
  CHECK(etcd.range("/job/ab", false).size() == 1);
}

TEST_CASE("etcd client: the create-if-absent election, its epoch and the writes it fences",
          "[integration][etcd][kernel-neutral]") {
  EtcdCluster cluster;
  EtcdCaller etcd(cluster.endpoints());
  const etcd::TxnResult won =
      etcd::txn_result(etcd.ok("/v3/kv/txn", etcd::create_if_absent_request("/j/leader", "a", 0)));
  CHECK(won.succeeded);
  const etcd::TxnResult lost =
      etcd::txn_result(etcd.ok("/v3/kv/txn", etcd::create_if_absent_request("/j/leader", "b", 0)));
  CHECK_FALSE(lost.succeeded);
  REQUIRE(lost.read.size() == 1);
  CHECK(lost.read[0].value == "a");  // the loser learns who leads
  const int64_t epoch = lost.read[0].create_revision;
  CHECK(epoch == won.revision);  // the winner's write made the key: its revision is the epoch
  // The leader's writes go through while its key stands with its epoch ...
  CHECK(etcd::txn_result(etcd.ok("/v3/kv/txn", etcd::guarded_txn_request("/j/leader", epoch,
                                                                         {{"/j/round", "1"}})))
            .succeeded);
  // ... and never once a new leader's key replaced it, even with the same value.
  etcd.ok("/v3/kv/deleterange", etcd::delete_request("/j/leader", false));
  etcd.ok("/v3/kv/txn", etcd::create_if_absent_request("/j/leader", "a", 0));
  CHECK_FALSE(etcd::txn_result(etcd.ok("/v3/kv/txn", etcd::guarded_txn_request(
                                                         "/j/leader", epoch, {{"/j/round", "2"}})))
                  .succeeded);
  CHECK(etcd.range("/j/round", false).at(0).value == "1");
}

TEST_CASE("etcd client: a lease keeps its keys while renewed, and they go when it lapses",
          "[integration][etcd][kernel-neutral]") {
  EtcdCluster cluster;
  EtcdCaller etcd(cluster.endpoints());
  const etcd::Lease lease =
      etcd::lease_result(etcd.ok("/v3/lease/grant", etcd::lease_grant_request(2)));
  REQUIRE(lease.id != 0);
  CHECK(lease.ttl == 2);
  etcd.ok("/v3/kv/put", etcd::put_request("/j/member/0", "host-a", lease.id));
  for (int i = 0; i < 4; ++i) {  // renewed every 0.7 s for 2.8 s: longer than its TTL
    std::this_thread::sleep_for(700ms);
    CHECK(
        etcd::lease_result(etcd.ok("/v3/lease/keepalive", etcd::lease_id_request(lease.id))).ttl ==
        2);
  }
  CHECK(etcd.range("/j/member/0", false).size() == 1);
  std::this_thread::sleep_for(3200ms);  // no renewal: expiry is checked every 0.5 s
  CHECK(etcd.range("/j/member/0", false).empty());
  // An expired lease still answers 200, without TTL.
  CHECK(etcd::lease_result(etcd.ok("/v3/lease/keepalive", etcd::lease_id_request(lease.id))).ttl ==
        0);
  // A revoked lease takes its keys at once (a clean exit leaves nothing under the prefix).
  const etcd::Lease second =
      etcd::lease_result(etcd.ok("/v3/lease/grant", etcd::lease_grant_request(60)));
  etcd.ok("/v3/kv/put", etcd::put_request("/j/member/1", "host-b", second.id));
  etcd.ok("/v3/lease/revoke", etcd::lease_id_request(second.id));
  CHECK(etcd.range("/j/", true).empty());
}

TEST_CASE("etcd client: members that are gone or never answer are passed over, all gone is named",
          "[integration][etcd][kernel-neutral]") {
  EtcdCluster cluster;
  // A listener that accepts and never answers (a hung member), then one nobody serves.
  const SilentListener stalled;
  const int stalled_port = stalled.port();
  const int free_port = unused_port();
  EtcdCaller etcd(
      fmt::format("127.0.0.1:{},127.0.0.1:{},{}", stalled_port, free_port, cluster.endpoints()),
      3s);  // a call during etcd's own election waits for its new leader
  etcd.ok("/v3/kv/put", etcd::put_request("/k", "v"));
  CHECK(etcd.client().member() == fmt::format("127.0.0.1:{}", cluster.client_port(0)));
  // One member of three lost: nothing changes for the caller.
  cluster.kill(0);
  CHECK(etcd.range("/k", false).at(0).value == "v");
  // (member 1, or member 2 when 1 was still waiting for etcd's own new leader)
  CHECK(etcd.client().member() != fmt::format("127.0.0.1:{}", cluster.client_port(0)));
  // All lost: every member is named with what it said.
  cluster.kill(1);
  cluster.kill(2);
  const std::string why = etcd.failure("/v3/kv/range", etcd::range_request("/k", false));
  CHECK_THAT(why, Contains("no etcd member answered"));
  CHECK_THAT(why, Contains(fmt::format("127.0.0.1:{}: ", stalled_port)));
  CHECK_THAT(why, Contains(fmt::format("127.0.0.1:{}: Connection refused", free_port)));
  CHECK_THAT(why, Contains(fmt::format("127.0.0.1:{}: ", cluster.client_port(2))));
}

TEST_CASE("etcd client: a user and password log in, a wrong password is refused by name",
          "[integration][etcd][kernel-neutral]") {
  EtcdCluster cluster(1);
  EtcdCaller admin(cluster.endpoints());
  admin.ok("/v3/auth/user/add", {{"name", "root"}, {"password", "root-secret"}});
  admin.ok("/v3/auth/user/grant", {{"user", "root"}, {"role", "root"}});
  admin.ok("/v3/auth/enable", etcd::Json::object());
  // Without a login etcd refuses; with one the call goes through.
  CHECK_THAT(admin.failure("/v3/kv/range", etcd::range_request("/k", false)),
             Contains("answered HTTP"));
  EtcdCaller user(cluster.endpoints(), 2s, "root", "root-secret");
  user.ok("/v3/kv/put", etcd::put_request("/k", "v"));
  CHECK(user.range("/k", false).at(0).value == "v");
  EtcdCaller wrong(cluster.endpoints(), 2s, "root", "not-the-secret");
  const std::string why = wrong.failure("/v3/kv/range", etcd::range_request("/k", false));
  CHECK_THAT(why,
             Contains("logging in to etcd as user 'root'") && Contains("authentication failed"));
  CHECK_THAT(why, !Contains("not-the-secret"));
}

TEST_CASE(
    "etcd watch: every put and delete under the prefix once, in order, across the loss of its "
    "member",
    "[integration][etcd][kernel-neutral]") {
  EtcdCluster cluster;
  boost::asio::io_context io;
  etcd::Settings settings;
  settings.endpoints = etcd::parse_endpoints(cluster.endpoints());
  settings.timeout = 3s;  // a call during etcd's own election waits for its new leader
  etcd::Client client(io, settings);
  auto call = [&](const std::string& path, const etcd::Json& body) {
    std::optional<etcd::Reply> reply;
    client.call(path, body, [&](etcd::Reply r) { reply = std::move(r); });
    REQUIRE(run_until(
        io, [&] { return reply.has_value(); }, 30s));
    if (auto* f = std::get_if<etcd::Failure>(&*reply)) FAIL(path << ": " << f->what);
    return std::get<etcd::Json>(*reply);
  };
  call("/v3/kv/put", etcd::put_request("/w/before", "not seen"));
  std::vector<std::string> seen;  // "PUT /w/a=1", "DELETE /w/a"
  int troubles = 0;
  etcd::Watch watch(
      io, client, "/w/", 0,
      {[&](const std::vector<etcd::WatchEvent>& events, int64_t) {
         for (const auto& e : events)
           seen.push_back(e.deleted ? "DELETE " + e.kv.key : "PUT " + e.kv.key + "=" + e.kv.value);
       },
       [&](const std::string& why) { FAIL("the watch ended: " << why); },
       [&](const std::string&) { ++troubles; }});
  io.run_for(300ms);  // the watch is created
  io.restart();
  call("/v3/kv/put", etcd::put_request("/w/a", "1"));
  call("/v3/kv/put", etcd::put_request("/x/other", "not watched"));
  call("/v3/kv/deleterange", etcd::delete_request("/w/a", false));
  const int64_t lease =
      etcd::lease_result(call("/v3/lease/grant", etcd::lease_grant_request(2))).id;
  call("/v3/kv/put", etcd::put_request("/w/member", "m", lease));
  REQUIRE(run_until(
      io, [&] { return seen.size() == 4; }, 10s));  // the lease lapses: a DELETE
  CHECK(seen == std::vector<std::string>{"PUT /w/a=1", "DELETE /w/a", "PUT /w/member=m",
                                         "DELETE /w/member"});
  // Its member dies while keys change: the watch resumes on another from where it was.
  cluster.kill(0);
  for (int i = 0; i < 5; ++i) call("/v3/kv/put", etcd::put_request("/w/n", std::to_string(i)));
  REQUIRE(run_until(
      io, [&] { return seen.size() == 9; }, 20s));
  CHECK(std::vector<std::string>(seen.begin() + 4, seen.end()) ==
        std::vector<std::string>{"PUT /w/n=0", "PUT /w/n=1", "PUT /w/n=2", "PUT /w/n=3",
                                 "PUT /w/n=4"});
  CHECK(troubles >= 1);
  io.run_for(500ms);
  CHECK(seen.size() == 9);  // nothing repeated
}

TEST_CASE("etcd watch: a compacted start revision ends it, saying so",
          "[integration][etcd][kernel-neutral]") {
  EtcdCluster cluster(1);
  EtcdCaller etcd(cluster.endpoints());
  for (int i = 0; i < 3; ++i) etcd.ok("/v3/kv/put", etcd::put_request("/c/k", std::to_string(i)));
  const int64_t now =
      etcd::header_revision(etcd.ok("/v3/kv/range", etcd::range_request("/c/k", false)));
  etcd.ok("/v3/kv/compaction", {{"revision", std::to_string(now)}, {"physical", true}});
  boost::asio::io_context io;
  etcd::Settings settings;
  settings.endpoints = etcd::parse_endpoints(cluster.endpoints());
  etcd::Client client(io, settings);
  std::optional<std::string> ended;
  etcd::Watch watch(io, client, "/c/", 2,
                    {[](const std::vector<etcd::WatchEvent>&, int64_t) {},
                     [&](const std::string& why) { ended = why; }, nullptr});
  REQUIRE(run_until(
      io, [&] { return ended.has_value(); }, 10s));
  CHECK_THAT(*ended, Contains("compacted"));
}

namespace {

// Both candidates hold a lease, and `a` leads; `b` has not campaigned yet.
void a_leads_b_waits(boost::asio::io_context& io, Candidate& a, Candidate& b) {
  REQUIRE(run_until(
      io, [&] { return a.granted && b.granted; }, 10s));
  a.run_for(io, "a");
  REQUIRE(run_until(
      io, [&] { return a.leads != 0; }, 10s));
}

}  // namespace

TEST_CASE(
    "etcd election: one leads, the other follows, and the leader's death or exit elects the "
    "other with a higher epoch",
    "[integration][etcd][kernel-neutral]") {
  EtcdCluster cluster;
  boost::asio::io_context io;
  Candidate a(io, cluster.endpoints());
  Candidate b(io, cluster.endpoints());
  a_leads_b_waits(io, a, b);
  b.run_for(io, "b");
  REQUIRE(run_until(
      io, [&] { return !b.follows.empty(); }, 10s));
  CHECK(b.follows == "a");
  CHECK(b.followed_epoch == a.leads);
  // a dies: its lease is no longer renewed, and lapses on etcd's side within its TTL.
  const auto died = std::chrono::steady_clock::now();
  a.keeper.abandon();
  a.election.reset();
  REQUIRE(run_until(
      io, [&] { return b.leads != 0; }, 10s));
  const double took =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - died).count();
  CHECK(took < 2.0 + 1.0);  // the TTL plus a second
  CHECK(b.leads > a.leads);
  // b exits cleanly: its revoked lease takes the key at once, and a new candidate leads.
  Candidate c(io, cluster.endpoints());
  REQUIRE(run_until(
      io, [&] { return c.granted; }, 10s));
  c.run_for(io, "c");
  REQUIRE(run_until(
      io, [&] { return c.follows == "b"; }, 10s));
  bool revoked = false;
  const auto left = std::chrono::steady_clock::now();
  b.keeper.revoke([&] { revoked = true; });
  REQUIRE(run_until(
      io, [&] { return c.leads != 0; }, 10s));
  CHECK(std::chrono::steady_clock::now() - left < 1s);
  CHECK(c.leads > b.leads);
  CHECK(revoked);
  CHECK_FALSE(c.lost.has_value());
}

// The crash chaos runs found: a deposed leader's rendezvous ends its election from the
// `following` handler, and the election went on to watch with what it no longer had.
TEST_CASE("etcd election: a handler that ends its election is the last of it that runs",
          "[integration][etcd][kernel-neutral]") {
  EtcdCluster cluster;
  EtcdCaller etcd(cluster.endpoints());
  boost::asio::io_context io;
  Candidate a(io, cluster.endpoints());
  Candidate b(io, cluster.endpoints());
  a_leads_b_waits(io, a, b);
  // Ended from the campaign's answer, where the crash was.
  b.on_following = [&] { b.election.reset(); };
  b.run_for(io, "b");
  REQUIRE(run_until(
      io, [&] { return b.followed == 1; }, 10s));
  CHECK_FALSE(b.election);
  // Ended from a watch batch of two events: the second is not looked at.
  b.on_following = [&] {
    if (b.followed == 3) b.election.reset();
  };
  b.run_for(io, "b");
  REQUIRE(run_until(
      io, [&] { return b.followed == 2; }, 10s));
  etcd.ok("/v3/kv/txn",
          etcd::guarded_txn_request("/job/leader", a.leads,
                                    {{"/job/leader", "a again"}, {"/job/leader-also", "x"}}, {},
                                    a.keeper.id()));
  REQUIRE(run_until(
      io, [&] { return b.followed == 3; }, 10s));
  CHECK_FALSE(b.election);
  io.run_for(500ms);  // anything still in flight for either ended election
  CHECK(b.follows == "a again");
}

}  // namespace test_etcd_client
