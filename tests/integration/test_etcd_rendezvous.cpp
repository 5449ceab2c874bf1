// --rdzv-backend etcd against a real 3-member etcd (support/etcd_cluster.hpp), agents on
// loopback: no node is given --master-addr; etcd elects the agent that hosts the rendezvous.
// A job runs and leaves nothing under its prefix; the leader's agent killed -> a new leader
// within the lease's TTL plus a second, and the job goes on from its memory (restart 1, fewer
// nodes); one etcd member lost changes nothing; etcd unreachable, or refusing the login, fails
// by name. etcd lost by the leader or by everyone: test_etcd_leader_lapse.cpp.
#include <fmt/format.h>
#include <signal.h>
#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <chrono>
#include <nlohmann/json.hpp>
#include <set>
#include <thread>

#include "support/etcd_caller.hpp"
#include "support/etcd_cluster.hpp"
#include "support/fixtures.hpp"
#include "support/harness.hpp"
#include "support/temp_dir.hpp"
#include "support/test_ca.hpp"

namespace test_etcd_rendezvous {

using namespace npu_run;
using namespace npu_run::testing;
using namespace std::chrono_literals;
using Catch::Matchers::Contains;

namespace {

// Each worker says who it is in this attempt, then works: long in the first attempt, briefly
// after a restart.
const std::string kWorker =
    "echo \"rank=$RANK world=$WORLD_SIZE restart=$TORCHELASTIC_RESTART_COUNT "
    "store=$MASTER_ADDR:$MASTER_PORT\"; "
    "if [ \"$TORCHELASTIC_RESTART_COUNT\" = 0 ]; then sleep ${FIRST_ATTEMPT:-0}; else sleep 1; fi";

std::unique_ptr<NpuRunProcess> start_agent(const EtcdCluster& cluster, const std::string& nnodes,
                                           const std::string& run_id,
                                           std::vector<std::string> flags = {},
                                           const EnvOverrides& env = {},
                                           const std::string& endpoints = "") {
  std::vector<std::string> args = {"--nnodes",
                                   nnodes,
                                   "--nproc-per-node",
                                   "1",
                                   "--rdzv-backend",
                                   "etcd",
                                   "--rdzv-endpoint",
                                   endpoints.empty() ? cluster.endpoints() : endpoints,
                                   "--rdzv-id",
                                   run_id,
                                   "--heartbeat-interval",
                                   "0.2",
                                   "--heartbeat-timeout",
                                   "3"};
  args.insert(args.end(), flags.begin(), flags.end());
  for (const char* a : {"--no-python", "/bin/sh", "-c"}) args.emplace_back(a);
  args.push_back(kWorker);
  return std::make_unique<NpuRunProcess>(args, env);
}

// The leader key's value, or null while there is none.
nlohmann::json leader_of(EtcdCaller& etcd, const std::string& run_id) {
  const auto kvs = etcd.range("/torchelastic/p2p/" + run_id + "/leader", false);
  return kvs.empty() ? nlohmann::json() : nlohmann::json::parse(kvs.front().value);
}

nlohmann::json wait_for_leader(EtcdCaller& etcd, const std::string& run_id, int other_than_pid,
                               std::chrono::milliseconds limit) {
  const auto until = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < until) {
    const nlohmann::json leader = leader_of(etcd, run_id);
    if (leader.is_object() && leader["pid"].get<int>() != other_than_pid) return leader;
    std::this_thread::sleep_for(50ms);
  }
  FAIL("no new leader in etcd within the limit");
  return {};
}

}  // namespace

TEST_CASE("etcd rendezvous: no --master-addr, etcd elects the host, nothing is left behind",
          "[integration][etcd]") {
  EtcdCluster cluster;
  std::vector<std::unique_ptr<NpuRunProcess>> agents;
  for (int i = 0; i < 3; ++i) agents.push_back(start_agent(cluster, "3", "plain"));
  std::vector<NpuRunProcess*> all;
  for (auto& a : agents) all.push_back(a.get());
  const auto finished = NpuRunProcess::wait_all(all, 60s);
  std::set<std::string> ranks;
  std::set<std::string> stores;
  for (const Finished& f : finished) {
    INFO(f.out << f.err);
    CHECK(f.exit_code == 0);
    for (const char* rank : {"rank=0 ", "rank=1 ", "rank=2 "}) {
      if (f.out.find(rank) != std::string::npos) ranks.insert(rank);
    }
    const auto at = f.out.find("store=");
    REQUIRE(at != std::string::npos);
    stores.insert(f.out.substr(at, f.out.find('\n', at) - at));
  }
  CHECK(ranks.size() == 3);
  CHECK(stores.size() == 1);  // every worker's store is the elected leader's
  CHECK_THAT(finished[0].err + finished[1].err + finished[2].err,
             Contains("etcd elected this agent to lead the rendezvous"));
  // Every lease was revoked on the way out: the job's keys are gone at once.
  EtcdCaller etcd(cluster.endpoints());
  CHECK(etcd.range("/torchelastic/p2p/plain/", true).empty());
  for (auto& a : agents) require_no_strays(*a);
}

TEST_CASE(
    "etcd rendezvous: the leader's node lost -> a new leader within the TTL plus a second, "
    "the job goes on from its memory",
    "[integration][etcd]") {
  EtcdCluster cluster;
  TempDir tmp;  // the agents' sockets, for npu_run status
  const EnvOverrides env = {{"FIRST_ATTEMPT", "60"}, {"TMPDIR", tmp.path()}};
  const std::vector<std::string> flags = {"--max-restarts", "1", "--rdzv-conf",
                                          "lease_ttl=2,last_call_timeout=1"};
  std::vector<std::unique_ptr<NpuRunProcess>> agents;
  for (int i = 0; i < 3; ++i) agents.push_back(start_agent(cluster, "2:3", "failover", flags, env));
  for (auto& a : agents) a->wait_for_output("restart=0", 1, 30s);
  EtcdCaller etcd(cluster.endpoints());
  const nlohmann::json first = leader_of(etcd, "failover");
  REQUIRE(first.is_object());
  const int leader_pid = first["pid"].get<int>();
  NpuRunProcess* leader = nullptr;
  std::vector<NpuRunProcess*> survivors;
  for (auto& a : agents) {
    if (a->pid() == leader_pid)
      leader = a.get();
    else
      survivors.push_back(a.get());
  }
  REQUIRE(leader != nullptr);
  REQUIRE(survivors.size() == 2);
  // `npu_run status --dump` on a follower: the elected leader's server asks every node.
  const Finished dump =
      run_npu_run({"status", "--dump", "--pid", std::to_string(survivors[0]->pid())},
                  {{"TMPDIR", tmp.path()}}, 30s);
  INFO(dump.out << dump.err);
  CHECK(dump.exit_code == 0);
  CHECK_THAT(dump.out, Contains("dump 1: 3 ranks on 3 nodes answered in"));

  // Its machine dies: the agent is SIGKILLed (its guardian takes its workers with it).
  const auto killed_at = std::chrono::steady_clock::now();
  leader->send_signal(SIGKILL);
  const nlohmann::json next = wait_for_leader(etcd, "failover", leader_pid, 10s);
  const double elected_after =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - killed_at).count();
  CHECK(elected_after < 2.0 + 1.0 + 0.5);  // TTL + a second (+ this test's polling)
  CHECK(next["pid"].get<int>() != leader_pid);

  const auto finished = NpuRunProcess::wait_all(survivors, 60s);
  for (const Finished& f : finished) {
    INFO(f.out << f.err);
    CHECK(f.exit_code == 0);
    // The next round is the job's restart 1 on the two nodes left, never a fresh job.
    CHECK_THAT(f.out, Contains("world=2 restart=1"));
  }
  CHECK(leader->wait(10s).term_signal == SIGKILL);
  CHECK_THAT(finished[0].err + finished[1].err, Contains("the job continues with round 1"));
  for (auto& a : agents) require_no_strays(*a);
  // The killed agent's keys lapsed with its lease; the others revoked theirs.
  CHECK(etcd.range("/torchelastic/p2p/failover/", true).empty());
}

TEST_CASE("etcd rendezvous: every agent SIGKILLed -> the job's keys lapse with the lease's TTL",
          "[integration][etcd]") {
  EtcdCluster cluster;
  const EnvOverrides env = {{"FIRST_ATTEMPT", "60"}};
  std::vector<std::unique_ptr<NpuRunProcess>> agents;
  for (int i = 0; i < 2; ++i) {
    agents.push_back(start_agent(cluster, "2", "killed", {"--rdzv-conf", "lease_ttl=2"}, env));
  }
  for (auto& a : agents) a->wait_for_output("restart=0", 1, 30s);
  EtcdCaller etcd(cluster.endpoints());
  REQUIRE(etcd.range("/torchelastic/p2p/killed/", true).size() >= 3);  // leader, 2 members
  for (auto& a : agents) a->send_signal(SIGKILL);
  const auto killed_at = std::chrono::steady_clock::now();
  while (!etcd.range("/torchelastic/p2p/killed/", true).empty() &&
         std::chrono::steady_clock::now() - killed_at < 10s) {
    std::this_thread::sleep_for(100ms);
  }
  const double gone_after =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - killed_at).count();
  CHECK(etcd.range("/torchelastic/p2p/killed/", true).empty());
  CHECK(gone_after < 2.0 + 1.5);  // the TTL, and etcd's expiry check every half second
  for (auto& a : agents) {
    CHECK(a->wait(10s).term_signal == SIGKILL);
    require_no_strays(*a);  // the guardian took each agent's worker with it
  }
}

TEST_CASE("etcd rendezvous: one etcd member lost during the job changes nothing",
          "[integration][etcd]") {
  EtcdCluster cluster;
  const EnvOverrides env = {{"FIRST_ATTEMPT", "4"}};
  std::vector<std::unique_ptr<NpuRunProcess>> agents;
  // The default TTL (5 s): etcd's own election after losing its leader member takes about a
  // second, which a 2 s lease's renewals could not ride out.
  for (int i = 0; i < 2; ++i) agents.push_back(start_agent(cluster, "2", "member", {}, env));
  for (auto& a : agents) a->wait_for_output("restart=0", 1, 30s);
  cluster.kill(0);
  std::vector<NpuRunProcess*> all{agents[0].get(), agents[1].get()};
  for (const Finished& f : NpuRunProcess::wait_all(all, 60s)) {
    INFO(f.out << f.err);
    CHECK(f.exit_code == 0);
    CHECK_THAT(f.out, !Contains("restart=1"));
  }
  for (auto& a : agents) require_no_strays(*a);
}

TEST_CASE(
    "etcd rendezvous: etcd unreachable at the start -> 125 within the timeout, naming "
    "every member",
    "[integration][etcd]") {
  const int a = unused_port();
  const int b = unused_port();
  const std::string endpoints = fmt::format("127.0.0.1:{},127.0.0.1:{}", a, b);
  const Finished f =
      run_npu_run({"--nnodes", "2", "--rdzv-backend", "etcd", "--rdzv-endpoint", endpoints,
                   "--rdzv-conf", "timeout=3", "--no-python", "/bin/true"},
                  {}, 30s);
  INFO(f.out << f.err);
  CHECK(f.exit_code == 125);
  CHECK(f.seconds < 3 + 3);
  CHECK_THAT(f.err, Contains("no rendezvous leader came from etcd at " + endpoints));
  CHECK_THAT(f.err, Contains(fmt::format("127.0.0.1:{}: Connection refused", a)));
  CHECK_THAT(f.err, Contains(fmt::format("127.0.0.1:{}: Connection refused", b)));
}

TEST_CASE(
    "etcd rendezvous: an endpoint nothing listens on is named within a second, not after the "
    "join timeout",
    "[integration][etcd]") {
  const int port = unused_port();
  const std::string endpoint = fmt::format("127.0.0.1:{}", port);
  NpuRunProcess agent({"--nnodes", "2", "--rdzv-backend", "etcd", "--rdzv-endpoint", endpoint,
                       "--no-python", "/bin/true"});
  // The default join timeout is 900 s: only the warning can come this soon.
  agent.wait_for_output(fmt::format("etcd at {} does not answer this agent", endpoint), 1, 1500ms,
                        /*in_stderr=*/true);
  agent.send_signal(SIGTERM);
  const Finished f = agent.wait(30s);
  INFO(f.err);
  CHECK_THAT(f.err, Contains(fmt::format("{}: Connection refused", endpoint)) &&
                        Contains("check --rdzv-endpoint"));
  require_no_strays(agent);
}

TEST_CASE(
    "etcd rendezvous: a user and password log in, a wrong password is refused by name and "
    "never shown",
    "[integration][etcd]") {
  EtcdCluster cluster;
  EtcdCaller admin(cluster.endpoints());
  admin.ok("/v3/auth/user/add", {{"name", "root"}, {"password", "root-secret"}});
  admin.ok("/v3/auth/user/grant", {{"user", "root"}, {"role", "root"}});
  admin.ok("/v3/auth/enable", etcd::Json::object());
  TempDir dir;
  const std::string file = dir.write("etcd-password", "root-secret\n");
  REQUIRE(::chmod(file.c_str(), 0600) == 0);
  std::vector<std::unique_ptr<NpuRunProcess>> agents;
  agents.push_back(
      start_agent(cluster, "2", "login", {"--rdzv-conf", "user=root,password_file=" + file}));
  agents.push_back(start_agent(cluster, "2", "login", {"--rdzv-conf", "user=root"},
                               {{"NPU_RUN_ETCD_PASSWORD", "root-secret"}}));
  std::vector<NpuRunProcess*> all{agents[0].get(), agents[1].get()};
  for (const Finished& f : NpuRunProcess::wait_all(all, 60s)) {
    INFO(f.out << f.err);
    CHECK(f.exit_code == 0);
    CHECK_THAT(f.out + f.err, !Contains("root-secret"));
  }
  const Finished wrong =
      run_npu_run({"--nnodes", "2", "--rdzv-backend", "etcd", "--rdzv-endpoint",
                   cluster.endpoints(), "--rdzv-conf", "user=root", "--no-python", "/bin/true"},
                  {{"NPU_RUN_ETCD_PASSWORD", "not-the-secret"}}, 30s);
  INFO(wrong.err);
  CHECK(wrong.exit_code == 125);
  CHECK(wrong.seconds < 10);
  CHECK_THAT(wrong.err, Contains("refused this agent") && Contains("authentication failed"));
  CHECK_THAT(wrong.out + wrong.err, !Contains("not-the-secret"));
  // The plan names where the password comes from, never the password.
  const Finished plan =
      run_npu_run({"--dry-run", "--nnodes", "2", "--rdzv-backend", "etcd", "--rdzv-endpoint",
                   cluster.endpoints(), "--rdzv-conf", "user=root", "--no-python", "/bin/true"},
                  {{"NPU_RUN_ETCD_PASSWORD", "root-secret"}}, 30s);
  CHECK(plan.exit_code == 0);
  CHECK_THAT(plan.out, Contains("user root with the password from NPU_RUN_ETCD_PASSWORD"));
  CHECK_THAT(plan.out + plan.err, !Contains("root-secret"));
  for (auto& a : agents) require_no_strays(*a);
}

TEST_CASE(
    "etcd rendezvous over TLS: a test CA, client certificates and a login work in both of "
    "torchrun's spellings, an unknown CA or certificate is refused by name",
    "[integration][etcd][tls]") {
  const TestCa ca;
  EtcdCluster cluster(3, &ca);
  EtcdCaller admin(cluster.client_settings());
  admin.ok("/v3/auth/user/add", {{"name", "root"}, {"password", "root-secret"}});
  admin.ok("/v3/auth/user/grant", {{"user", "root"}, {"role", "root"}});
  admin.ok("/v3/auth/enable", etcd::Json::object());
  const EnvOverrides password{{"NPU_RUN_ETCD_PASSWORD", "root-secret"}};
  // etcd-v2's spelling: protocol=https over bare host:port members; etcd's: https:// members.
  std::string bare = cluster.endpoints();
  for (size_t at = bare.find("https://"); at != std::string::npos; at = bare.find("https://"))
    bare.erase(at, 8);
  const std::string v2_files = fmt::format("protocol=https,ca_cert={},ssl_cert={},ssl_cert_key={}",
                                           ca.ca(), ca.client_cert(), ca.client_key());
  const std::string files =
      fmt::format("cacert={},cert={},key={}", ca.ca(), ca.client_cert(), ca.client_key());
  std::vector<std::unique_ptr<NpuRunProcess>> agents;
  agents.push_back(
      start_agent(cluster, "2", "tls", {"--rdzv-conf", "user=root," + files}, password));
  agents.push_back(
      start_agent(cluster, "2", "tls", {"--rdzv-conf", "user=root," + v2_files}, password, bare));
  std::vector<NpuRunProcess*> all{agents[0].get(), agents[1].get()};
  for (const Finished& f : NpuRunProcess::wait_all(all, 60s)) {
    INFO(f.out << f.err);
    CHECK(f.exit_code == 0);
    CHECK_THAT(f.out, Contains("world=2 restart=0"));
    CHECK_THAT(f.out + f.err, !Contains("root-secret"));
  }
  etcd::Settings login = cluster.client_settings();
  login.user = "root";
  login.password = "root-secret";
  EtcdCaller etcd(login);
  CHECK(etcd.range("/torchelastic/p2p/tls/", true).empty());
  // Refused by name within seconds, not after the rendezvous timeout: a certificate is a setting.
  // Well before the rendezvous timeout (120 s here). Under TLS 1.3 a member judges the client's
  // certificate after the client's handshake, and its alert can be overtaken by the reset of
  // the request the client already sent: that try is "no answer", asked again a second later.
  // The client remembers each member's refusal until that member answers, so the refusal is
  // named once every member has said it once; before, all of them had to in the same try (seen
  // taking 14 s and 45 s under ASan, and 93 s under CI's load). The bound is the rendezvous
  // timeout's three quarters: what matters is that the refusal is named before it.
  const auto refused = [&](const std::string& conf) {
    const Finished f = run_npu_run(
        {"--nnodes", "2", "--rdzv-backend", "etcd", "--rdzv-endpoint", cluster.endpoints(),
         "--rdzv-conf", conf, "--rdzv-timeout", "120", "--no-python", "/bin/true"},
        password, 150s);
    INFO(conf << "\n" << f.err);
    CHECK(f.exit_code == 125);
    CHECK(f.seconds < 90);
    CHECK_THAT(f.err, Contains("refused this agent"));
    return f.err;
  };
  // The members' certificates come from a CA this agent does not know.
  CHECK_THAT(refused(fmt::format("user=root,cacert={},cert={},key={}", ca.other_ca(),
                                 ca.client_cert(), ca.client_key())),
             Contains("TLS certificate refused") && Contains("certificate verify failed"));
  // This agent's certificate comes from a CA the members do not know, or there is none.
  CHECK_THAT(refused(fmt::format("user=root,cacert={},cert={},key={}", ca.ca(),
                                 ca.other_client_cert(), ca.other_client_key())),
             Contains("TLS certificate refused") && Contains("alert"));
  CHECK_THAT(refused(fmt::format("user=root,cacert={}", ca.ca())),
             Contains("TLS certificate refused"));
  // A certificate with a CommonName beside a login: etcd's gateway refuses it; the fix is named.
  CHECK_THAT(refused(fmt::format("user=root,cacert={},cert={},key={}", ca.ca(), ca.server_cert(),
                                 ca.server_key())),
             Contains("must carry no CommonName"));
  // The right certificates and a wrong password: etcd's own refusal.
  TempDir dir;
  const std::string wrong = dir.write("wrong-password", "not-the-secret\n");
  REQUIRE(::chmod(wrong.c_str(), 0600) == 0);
  CHECK_THAT(refused("user=root," + files + ",password_file=" + wrong),
             Contains("authentication failed"));
  // A file that is not what its key says: a usage error, before any request.
  const Finished not_pem = run_npu_run(
      {"--nnodes", "2", "--rdzv-backend", "etcd", "--rdzv-endpoint", cluster.endpoints(),
       "--rdzv-conf", fmt::format("cacert={},cert={},key={}", ca.ca(), ca.client_cert(), ca.ca()),
       "--no-python", "/bin/true"},
      {}, 30s);
  CHECK(not_pem.exit_code == 2);
  CHECK_THAT(not_pem.err, Contains("etcd client key (key) " + ca.ca()));
  // The plan says how etcd is reached, never the password.
  const Finished plan = run_npu_run(
      {"--dry-run", "--nnodes", "2", "--rdzv-backend", "etcd", "--rdzv-endpoint",
       cluster.endpoints(), "--rdzv-conf", "user=root," + files, "--no-python", "/bin/true"},
      password, 30s);
  CHECK(plan.exit_code == 0);
  CHECK_THAT(plan.out, Contains("TLS checked against " + ca.ca()) &&
                           Contains("client certificate " + ca.client_cert()));
  CHECK_THAT(plan.out + plan.err, !Contains("root-secret"));
  for (auto& a : agents) require_no_strays(*a);
}

}  // namespace test_etcd_rendezvous
