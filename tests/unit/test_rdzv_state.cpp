// The rendezvous state machine, driven directly: no sockets, time passed in.
#include <catch2/catch.hpp>

#include "rendezvous/auth.hpp"
#include "rendezvous/hang_blame.hpp"
#include "rendezvous/state.hpp"
#include "support/outgoing.hpp"

namespace test_rdzv_state {

using namespace npu_run::rdzv;
using Catch::Matchers::Contains;
using npu_run::HealthMode;
using npu_run::HealthStatus;
using npu_run::kExitRendezvous;
using npu_run::NodeVerdict;
using npu_run::testing::message_to;
using namespace std::chrono_literals;

namespace {

// Simulated time: the steady clock at its epoch, the wall clock at some day in 2023.
const Now t0{Clock::time_point{}, 1'700'000'000'000};

NodeInfo node(const std::string& host, int nproc = 2, int port = 40000) {
  NodeInfo n;
  n.host = host;
  n.addr = "10.0.0." + std::to_string(host.size());
  n.nproc = nproc;
  for (int i = 0; i < nproc; ++i) n.devices.push_back(i);
  n.worker_port = port;
  return n;
}

JobSettings settings(int nodes, int max_restarts = 0) {
  JobSettings s;
  s.run_id = "job";
  s.min_nodes = s.max_nodes = nodes;
  s.max_restarts = max_restarts;
  s.heartbeat_timeout = 30s;
  s.progress_interval = 5s;
  s.join_timeout = 900s;
  return s;
}

Join join_as(const NodeInfo& n, std::optional<int> rank, int nodes, int max_restarts = 0) {
  Join j;
  j.node = n;
  j.node_rank = rank;
  j.min_nodes = j.max_nodes = nodes;
  j.max_restarts = max_restarts;
  return j;
}

// A test driver: greets clients, joins them, and looks into what the machine sent to whom.
struct Job {
  RendezvousState state;
  explicit Job(JobSettings s) : state(std::move(s), t0) {}

  std::vector<Outgoing> send(ClientId id, const ClientMessage& m, Now now = t0) {
    return state.on_message(id, m, now);
  }
  void greet(ClientId id) {
    const auto out = send(id, Hello{kMagic, kProtocolVersion, "job", ""});
    REQUIRE(out.size() == 1);
    REQUIRE(std::holds_alternative<Welcome>(out[0].message));
  }
  std::vector<Outgoing> join(ClientId id, const NodeInfo& n,
                             std::optional<int> rank = std::nullopt) {
    greet(id);
    return send(id, join_as(n, rank, state.settings().max_nodes, state.settings().max_restarts));
  }
};

ErrorReply error_to(const std::vector<Outgoing>& out, ClientId id) {
  const ErrorReply* e = message_to<ErrorReply>(out, id);
  REQUIRE(e != nullptr);
  bool closed = false;
  for (const Outgoing& o : out)
    closed = closed || (o.close_after && std::holds_alternative<ErrorReply>(o.message));
  CHECK(closed);  // a rejected agent is disconnected after hearing why
  return *e;
}

Report failed(uint64_t round, int rank, int exit_code) {
  FailureReport f;
  f.rank = rank;
  f.exit_code = exit_code;
  f.description = "exit code " + std::to_string(exit_code);
  return Report{round, Outcome::kFailed, f, 0};
}

}  // namespace

TEST_CASE("rdzv state: hello is checked before anything else", "[rdzv]") {
  Job job(settings(2));
  CHECK(error_to(job.send(1, Join{}), 1).code == "protocol_order");
  CHECK(error_to(job.send(2, Hello{"other", kProtocolVersion, "job", ""}), 2).code == "bad_magic");
  const auto version = error_to(job.send(3, Hello{kMagic, 99, "job", ""}), 3);
  CHECK(version.code == "version_mismatch");
  CHECK_THAT(version.message, Contains("protocol 99") && Contains("same npu_run version"));
  const auto run = error_to(job.send(4, Hello{kMagic, kProtocolVersion, "other", ""}), 4);
  CHECK(run.code == "run_id_mismatch");
  CHECK_THAT(run.message, Contains("'other' differs from the job's 'job'"));
  const auto unexpected = error_to(job.send(5, Hello{kMagic, kProtocolVersion, "job", "n"}), 5);
  CHECK(unexpected.code == "unexpected_token");
  CHECK_THAT(unexpected.message, Contains("agent has a rendezvous token but this job's server has "
                                          "none"));
  job.greet(6);
  CHECK(error_to(job.send(6, Hello{kMagic, kProtocolVersion, "job", ""}), 6).code ==
        "protocol_order");
  CHECK(job.state.connected_clients() == 0);  // every rejected client is forgotten
}

TEST_CASE("rdzv state: a token is proven by HMAC challenge and response, never sent", "[rdzv]") {
  JobSettings with_token = settings(1);
  with_token.token = "secret";
  Job job(with_token);
  int nonces = 0;
  job.state.set_nonce_source([&] { return "server-nonce-" + std::to_string(++nonces); });

  // The right token: a challenge carrying the server's proof, then the welcome.
  const auto hello = job.send(1, Hello{kMagic, kProtocolVersion, "job", "agent-nonce"});
  const Challenge* challenge = message_to<Challenge>(hello, 1);
  REQUIRE(challenge != nullptr);
  CHECK(challenge->nonce == "server-nonce-1");
  CHECK(challenge->proof == server_proof("secret", "job", "agent-nonce", "server-nonce-1"));
  CHECK_FALSE(job.state.authenticated(1));
  CHECK(error_to(job.send(1, Join{}), 1).code == "protocol_order");  // not before the proof

  job.send(2, Hello{kMagic, kProtocolVersion, "job", "agent-nonce"});
  const auto welcome =
      job.send(2, Auth{agent_proof("secret", "job", "server-nonce-2", "agent-nonce")});
  CHECK(message_to<Welcome>(welcome, 2) != nullptr);
  CHECK(job.state.authenticated(2));
  CHECK(error_to(job.send(2, Auth{"again"}), 2).code == "protocol_order");

  // A wrong token, and a proof replayed from another connection (it was for nonce 2).
  job.send(3, Hello{kMagic, kProtocolVersion, "job", "agent-nonce"});
  const auto wrong =
      error_to(job.send(3, Auth{agent_proof("guess", "job", "server-nonce-3", "agent-nonce")}), 3);
  CHECK(wrong.code == "bad_token");
  CHECK_THAT(wrong.message, Contains("give every node the same token"));
  job.send(4, Hello{kMagic, kProtocolVersion, "job", "agent-nonce"});
  CHECK(
      error_to(job.send(4, Auth{agent_proof("secret", "job", "server-nonce-2", "agent-nonce")}), 4)
          .code == "bad_token");
  // The server's own proof is not an agent proof (different label).
  job.send(5, Hello{kMagic, kProtocolVersion, "job", "agent-nonce"});
  CHECK(
      error_to(job.send(5, Auth{server_proof("secret", "job", "agent-nonce", "server-nonce-5")}), 5)
          .code == "bad_token");

  // No token at all, and an answer nobody asked for.
  const auto missing = error_to(job.send(6, Hello{kMagic, kProtocolVersion, "job", ""}), 6);
  CHECK(missing.code == "missing_token");
  CHECK_THAT(missing.message, Contains("NPU_RUN_RDZV_TOKEN"));
  CHECK(error_to(job.send(7, Auth{"x"}), 7).code == "protocol_order");
  CHECK(job.state.connected_clients() == 0);  // every refused client is forgotten
}

TEST_CASE("rdzv auth: proofs depend on every input and compare exactly", "[rdzv]") {
  const std::string p = agent_proof("t", "job", "s", "a");
  CHECK(p.size() == 64);
  CHECK(p != agent_proof("u", "job", "s", "a"));
  CHECK(p != agent_proof("t", "job2", "s", "a"));
  CHECK(p != agent_proof("t", "job", "s2", "a"));
  CHECK(p != agent_proof("t", "job", "s", "a2"));
  CHECK(p != server_proof("t", "job", "s", "a"));
  CHECK(proofs_match(p, p));
  CHECK_FALSE(proofs_match(p, p.substr(0, 63)));
  CHECK_FALSE(proofs_match(p, std::string(64, '0')));
  // RFC 4231 test case 2.
  CHECK(hmac_sha256_hex("Jefe", "what do ya want for nothing?") ==
        "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
  CHECK(random_nonce().size() == 64);
  CHECK(random_nonce() != random_nonce());
}

TEST_CASE("rdzv state: automatic ranks are sorted by host, then arrival", "[rdzv]") {
  Job job(settings(3));
  CHECK(job.join(1, node("c-host")).empty());
  CHECK(job.join(2, node("a-host")).empty());
  const auto out = job.join(3, node("b-host"));
  REQUIRE(job.state.phase() == RendezvousState::Phase::kRunning);
  const Assigned* a = message_to<Assigned>(out, 2);
  const Assigned* b = message_to<Assigned>(out, 3);
  const Assigned* c = message_to<Assigned>(out, 1);
  REQUIRE((a && b && c));
  CHECK(a->node_rank == 0);
  CHECK(b->node_rank == 1);
  CHECK(c->node_rank == 2);
  CHECK(c->nnodes == 3);
  CHECK(c->world_size == 6);
  CHECK(c->rank_offset == 4);
  CHECK(c->round == 0);
  CHECK(c->restart_count == 0);
  // Workers' store: node 0's address and the port node 0 holds.
  CHECK(c->master_addr == node("a-host").addr);
  CHECK(c->master_port == 40000);
  CHECK(c->peers.empty());
}

TEST_CASE("rdzv state: same host name keeps arrival order", "[rdzv]") {
  Job job(settings(2));
  job.join(7, node("same"));
  const auto out = job.join(3, node("same"));
  CHECK(message_to<Assigned>(out, 7)->node_rank == 0);
  CHECK(message_to<Assigned>(out, 3)->node_rank == 1);
}

TEST_CASE("rdzv state: explicit ranks are honoured and automatic ones fill the gaps", "[rdzv]") {
  Job job(settings(4));
  job.join(1, node("zz"), 0);
  job.join(2, node("aa"));
  job.join(3, node("mm"), 3);
  const auto out = job.join(4, node("bb"));
  CHECK(message_to<Assigned>(out, 1)->node_rank == 0);
  CHECK(message_to<Assigned>(out, 2)->node_rank == 1);
  CHECK(message_to<Assigned>(out, 4)->node_rank == 2);
  CHECK(message_to<Assigned>(out, 3)->node_rank == 3);
}

TEST_CASE("rdzv state: nodes with different worker counts get prefix-sum offsets", "[rdzv]") {
  Job job(settings(3));
  job.join(1, node("n2", 1, 41000), 2);
  job.join(2, node("n0", 8, 42000), 0);
  const auto out = job.join(3, node("n1", 3, 43000), 1);
  CHECK(message_to<Assigned>(out, 2)->rank_offset == 0);
  CHECK(message_to<Assigned>(out, 3)->rank_offset == 8);
  CHECK(message_to<Assigned>(out, 1)->rank_offset == 11);
  CHECK(message_to<Assigned>(out, 1)->world_size == 12);
  CHECK(message_to<Assigned>(out, 1)->master_port == 42000);
}

TEST_CASE("rdzv state: the peer table goes to those who ask", "[rdzv]") {
  Job job(settings(2));
  job.greet(1);
  Join j = join_as(node("a"), std::nullopt, 2);
  j.want_peers = true;
  job.send(1, j);
  const auto out = job.join(2, node("b"));
  const Assigned* a = message_to<Assigned>(out, 1);
  REQUIRE(a->peers.size() == 2);
  CHECK(a->peers[1].node.host == "b");
  CHECK(a->peers[1].rank_offset == 2);
  CHECK(message_to<Assigned>(out, 2)->peers.empty());
}

TEST_CASE("rdzv state: conflicts are rejected, naming what clashed", "[rdzv]") {
  Job job(settings(2, 1));
  job.join(1, node("host-a"), 1);
  SECTION("two agents claiming one node rank") {
    const auto e = error_to(job.join(2, node("host-b"), 1), 2);
    CHECK(e.code == "node_rank_taken");
    CHECK_THAT(e.message, Contains("host-b") && Contains("--node-rank 1") && Contains("host-a"));
    CHECK(job.state.joined() == 1);  // the first keeps its seat
  }
  SECTION("node rank beyond --nnodes") {
    const auto e = error_to(job.join(2, node("host-b"), 2), 2);
    CHECK(e.code == "node_rank_out_of_range");
    CHECK_THAT(e.message, Contains("--node-rank 2") && Contains("from 0 to 1"));
  }
  SECTION("different --nnodes") {
    job.greet(2);
    const auto e = error_to(job.send(2, join_as(node("host-b"), std::nullopt, 3, 1)), 2);
    CHECK(e.code == "nnodes_mismatch");
    CHECK_THAT(e.message, Contains("--nnodes 3 but the job has --nnodes 2"));
  }
  SECTION("different --max-restarts") {
    job.greet(2);
    CHECK(error_to(job.send(2, join_as(node("host-b"), std::nullopt, 2, 5)), 2).code ==
          "max_restarts_mismatch");
  }
  SECTION("a job that is already full") {
    job.join(2, node("host-b"));
    const auto e = error_to(job.join(3, node("host-c")), 3);
    CHECK(e.code == "job_full");
    CHECK_THAT(e.message, Contains("all 2 nodes") && Contains("host-a") && Contains("host-b") &&
                              Contains("host-c"));
  }
  SECTION("joining twice") {
    CHECK(error_to(job.send(1, join_as(node("host-a"), 1, 2, 1)), 1).code == "protocol_order");
  }
}

TEST_CASE("rdzv state: a joiner that leaves frees its seat", "[rdzv]") {
  Job job(settings(2));
  job.join(1, node("a"), 0);
  CHECK(job.state.on_disconnect(1, t0).empty());
  CHECK(job.state.joined() == 0);
  job.join(2, node("b"), 0);  // rank 0 is free again
  const auto out = job.join(3, node("c"));
  CHECK(message_to<Assigned>(out, 2)->node_rank == 0);
}

TEST_CASE("rdzv state: all nodes succeed -> every node is told to finish with 0", "[rdzv]") {
  Job job(settings(2));
  job.join(1, node("a"));
  job.join(2, node("b"));
  CHECK(job.send(1, Report{0, Outcome::kSucceeded, std::nullopt, 0}).empty());
  const auto out = job.send(2, Report{0, Outcome::kSucceeded, std::nullopt, 0});
  const Decision* d = message_to<Decision>(out, 1);
  REQUIRE(d != nullptr);
  CHECK(message_to<Decision>(out, 2) != nullptr);
  CHECK(d->action == Action::kFinish);
  CHECK(d->exit_code == 0);
  CHECK_FALSE(d->root_cause);
  CHECK(job.state.phase() == RendezvousState::Phase::kFinished);
  REQUIRE(job.state.final_decision());
}

TEST_CASE("rdzv state: a failure stops the other nodes, then one finish with the root cause",
          "[rdzv]") {
  Job job(settings(3));
  job.join(1, node("a"));
  job.join(2, node("b"));
  job.join(3, node("c"));
  auto out = job.send(2, failed(0, 3, 7));
  CHECK(job.state.phase() == RendezvousState::Phase::kStopping);
  const StopWorkers* stop = message_to<StopWorkers>(out, 1);
  REQUIRE(stop != nullptr);
  CHECK(message_to<StopWorkers>(out, 3) != nullptr);
  CHECK(message_to<StopWorkers>(out, 2) == nullptr);  // the failing node knows
  CHECK(stop->root_cause.host == "b");
  CHECK(stop->root_cause.node_rank == 1);
  CHECK(stop->root_cause.rank == 3);
  // A later failure elsewhere is a consequence, not the root cause.
  CHECK(job.send(1, failed(0, 0, 9)).empty());
  out = job.send(3, Report{0, Outcome::kStopped, std::nullopt, 0});
  const Decision* d = message_to<Decision>(out, 3);
  REQUIRE(d != nullptr);
  CHECK(d->action == Action::kFinish);
  CHECK(d->exit_code == 7);
  CHECK(d->root_cause->host == "b");
  CHECK(d->root_cause->rank == 3);
}

TEST_CASE("rdzv state: restarts run a new round together until they are used up", "[rdzv]") {
  Job job(settings(2, 2));
  job.join(1, node("a"));
  job.join(2, node("b"));
  for (int attempt = 1; attempt <= 2; ++attempt) {
    job.send(1, failed(job.state.round(), 0, 3));
    const auto out = job.send(2, Report{job.state.round(), Outcome::kStopped, std::nullopt, 0});
    const Decision* d = message_to<Decision>(out, 2);
    REQUIRE(d != nullptr);
    CHECK(d->action == Action::kRestart);
    CHECK(d->restart_count == attempt);
    CHECK(d->root_cause->exit_code == 3);
    CHECK(job.state.phase() == RendezvousState::Phase::kJoining);
    CHECK(job.send(2, join_as(node("b"), std::nullopt, 2, 2)).empty());
    const auto assigned = job.send(1, join_as(node("a"), std::nullopt, 2, 2));
    CHECK(message_to<Assigned>(assigned, 1)->restart_count == attempt);
    CHECK(message_to<Assigned>(assigned, 2)->restart_count == attempt);
    CHECK(message_to<Assigned>(assigned, 2)->round == static_cast<uint64_t>(attempt));
  }
  job.send(1, failed(2, 0, 4));
  const auto out = job.send(2, Report{2, Outcome::kStopped, std::nullopt, 0});
  CHECK(message_to<Decision>(out, 1)->action == Action::kFinish);
  CHECK(message_to<Decision>(out, 1)->exit_code == 4);
  CHECK(message_to<Decision>(out, 1)->restart_count == 2);
}

TEST_CASE("rdzv state: restarts that make no progress in a row stop the job with 123", "[rdzv]") {
  JobSettings s = settings(2, 10);
  s.max_no_progress_restarts = 2;
  Job job(s);
  job.join(1, node("a"));
  job.join(2, node("b"));
  // Round 0 progresses (a first attempt that beat), round 1 does not, round 2 does (the count
  // starts over), rounds 3 and 4 do not: the job ends after round 4.
  const std::vector<bool> progress = {true, false, true, false, false};
  for (size_t round = 0; round < progress.size(); ++round) {
    Report failure = failed(job.state.round(), 0, 3);
    failure.progressed = progress[round];
    job.send(1, failure);
    Report stopped{job.state.round(), Outcome::kStopped, std::nullopt, 0};
    stopped.progressed = false;
    const auto out = job.send(2, stopped);
    const Decision* d = message_to<Decision>(out, 2);
    REQUIRE(d != nullptr);
    if (round + 1 < progress.size()) {
      CHECK(d->action == Action::kRestart);
      job.send(2, join_as(node("b"), std::nullopt, 2, 10));
      job.send(1, join_as(node("a"), std::nullopt, 2, 10));
      continue;
    }
    CHECK(d->action == Action::kFinish);
    CHECK(d->exit_code == npu_run::kExitNoProgress);
    CHECK(d->root_cause->exit_code == 3);  // the failure itself is still named
    CHECK(d->restart_count == 4);
  }
}

TEST_CASE("rdzv state: a hang notice stops the other nodes at once, before the hung node reports",
          "[rdzv]") {
  Job job(settings(3));
  job.join(1, node("a"));
  job.join(2, node("b"));
  job.join(3, node("c"));
  FailureReport hang;
  hang.host = "claimed";  // identity comes from the seat
  hang.rank = 5;
  hang.exit_code = npu_run::kExitHang;
  hang.description = "hung: no progress for 600 s after 'step 1200'";
  hang.time_ms = 1'700'000'000'500;
  CHECK(job.send(3, HangNotice{7, hang}).empty());  // another round's: nothing
  const auto out = job.send(3, HangNotice{job.state.round(), hang});
  for (ClientId other : {1, 2}) {
    const StopWorkers* stop = message_to<StopWorkers>(out, other);
    REQUIRE(stop != nullptr);
    CHECK(stop->root_cause.hang);
    CHECK(stop->root_cause.host == "c");
    CHECK(stop->root_cause.rank == 5);
  }
  CHECK(message_to<StopWorkers>(out, 3) == nullptr);
  // Its report later names the same failure; the others' stops follow; one decision.
  Report report{job.state.round(), Outcome::kFailed, hang, 0};
  CHECK(job.send(3, report).empty());
  job.send(1, Report{job.state.round(), Outcome::kStopped, std::nullopt, 0});
  const auto decided = job.send(2, Report{job.state.round(), Outcome::kStopped, std::nullopt, 0});
  const Decision* d = message_to<Decision>(decided, 1);
  REQUIRE(d != nullptr);
  CHECK(d->exit_code == npu_run::kExitHang);
  CHECK(d->root_cause->hang);
  CHECK(d->root_cause->node_rank == 2);
}

TEST_CASE("rdzv state: a hang is blamed on the rank whose stack is the odd one out, on any node",
          "[rdzv][hangs]") {
  Job job(settings(2));
  job.join(1, node("a"));  // ranks 0-1
  job.join(2, node("b"));  // ranks 2-3
  // Node a's timer ran out first (every rank waits in the collective); rank 3 is elsewhere.
  FailureReport hang;
  hang.rank = 0;
  hang.local_rank = 0;
  hang.exit_code = npu_run::kExitHang;
  hang.hang = true;
  hang.description = "hung: no progress for 2 s after 'step 4'";
  hang.time_ms = 1'700'000'000'500;
  job.send(1, HangNotice{job.state.round(), hang});
  auto at = [](int rank, const char* top) {
    return RankStack{rank, 0, 100 + rank, {top}, "step 4", 2000};
  };
  Report a{job.state.round(), Outcome::kFailed, hang, 0};
  a.stacks = {at(0, "c10d.py:1 in all_reduce"), at(1, "c10d.py:1 in all_reduce"),
              at(3, "forged.py:1 in claimed")};  // node b's rank: not node a's to report
  job.send(1, a);
  Report b{job.state.round(), Outcome::kStopped, std::nullopt, 0};
  b.stacks = {at(2, "c10d.py:1 in all_reduce"), at(3, "loader.py:88 in wait")};
  const auto out = job.send(2, b);
  const Decision* d = message_to<Decision>(out, 1);
  REQUIRE(d != nullptr);
  CHECK(d->exit_code == npu_run::kExitHang);
  CHECK(d->odd_ranks == std::vector<int>{3});
  REQUIRE(d->root_cause);
  CHECK(d->root_cause->rank == 3);
  CHECK(d->root_cause->local_rank == 1);  // from the seat's rank offset
  CHECK(d->root_cause->host == "b");
  CHECK(d->root_cause->node_rank == 1);
  CHECK(d->root_cause->hang);
  CHECK(d->root_cause->time_ms == hang.time_ms);
  CHECK(d->root_cause->description ==
        "hung: no progress for 2.0 s after 'step 4'; stuck in loader.py:88 in wait (the odd one "
        "out: 3 of 4 ranks were in c10d.py:1 in all_reduce)" +
            std::string(npu_run::rdzv::kNoRecorderNote));
  CHECK(message_to<Decision>(out, 2)->root_cause->rank == 3);
}

TEST_CASE("rdzv state: with flight records a hang is blamed on the rank that never entered",
          "[rdzv][hangs][flight-recorder]") {
  Job job(settings(2));
  job.join(1, node("a"));  // ranks 0-1
  job.join(2, node("b"));  // ranks 2-3
  FailureReport hang;
  hang.rank = 0;
  hang.exit_code = npu_run::kExitHang;
  hang.hang = true;
  hang.description = "hung: no progress for 2 s after 'step 4'";
  hang.time_ms = 1'700'000'000'500;
  job.send(1, HangNotice{job.state.round(), hang});
  // Every stack is in all_reduce: only the sequence numbers tell rank 2 is behind.
  auto at = [](int rank, int64_t entered) {
    RankStack s{rank, 0, 100 + rank, {"c10d.py:1 in all_reduce"}, "step 4", 2000};
    s.record = RankRecord::kServer;
    s.recorder = true;
    GroupCalls group{"default_pg", entered, 40, {}};
    group.last.push_back(RecordedCall{entered, "all_reduce", "[[8]]", "Float", 5000, false});
    s.groups = {group};
    return s;
  };
  Report a{job.state.round(), Outcome::kFailed, hang, 0};
  a.stacks = {at(0, 41), at(1, 41)};
  job.send(1, a);
  Report b{job.state.round(), Outcome::kStopped, std::nullopt, 0};
  b.stacks = {at(2, 40), at(3, 41)};
  const auto out = job.send(2, b);
  const Decision* d = message_to<Decision>(out, 1);
  REQUIRE(d != nullptr);
  REQUIRE(d->root_cause);
  CHECK(d->root_cause->rank == 2);
  CHECK(d->root_cause->host == "b");
  CHECK(d->root_cause->node_rank == 1);
  CHECK(d->odd_ranks == std::vector<int>{2});
  CHECK(d->root_cause->description ==
        "hung: rank 2 never entered all_reduce #41 of the default group, which ranks 0, 1 and 3 "
        "entered 5.0 s ago; rank 2 is in c10d.py:1 in all_reduce");
}

TEST_CASE("rdzv state: stale and duplicate reports are ignored", "[rdzv]") {
  Job job(settings(2));
  job.join(1, node("a"));
  job.join(2, node("b"));
  CHECK(job.send(1, Report{5, Outcome::kSucceeded, std::nullopt, 0}).empty());
  job.send(1, Report{0, Outcome::kSucceeded, std::nullopt, 0});
  CHECK(job.send(1, failed(0, 0, 1)).empty());  // already reported success
  CHECK(job.state.phase() == RendezvousState::Phase::kRunning);
}

TEST_CASE("rdzv state: an agent stopped by a signal ends the job without a restart", "[rdzv]") {
  Job job(settings(2, 3));
  job.join(1, node("a"));
  job.join(2, node("b"));
  auto out = job.send(1, Report{0, Outcome::kStopped, std::nullopt, 15});
  CHECK(message_to<StopWorkers>(out, 2) != nullptr);
  out = job.send(2, Report{0, Outcome::kStopped, std::nullopt, 0});
  const Decision* d = message_to<Decision>(out, 2);
  REQUIRE(d != nullptr);
  CHECK(d->action == Action::kFinish);
  CHECK(d->exit_code == 143);
  CHECK_THAT(d->root_cause->description, Contains("stopped by signal 15"));
}

TEST_CASE("rdzv state: a node lost mid-round is a failure of the job", "[rdzv]") {
  Job job(settings(2));
  job.join(1, node("a"));
  job.join(2, node("b"));
  auto out = job.state.on_disconnect(2, t0);
  const StopWorkers* stop = message_to<StopWorkers>(out, 1);
  REQUIRE(stop != nullptr);
  CHECK(stop->root_cause.host == "b");
  CHECK(stop->root_cause.exit_code == kExitRendezvous);
  CHECK_THAT(stop->root_cause.description, Contains("agent lost: connection closed"));
  out = job.send(1, Report{0, Outcome::kStopped, std::nullopt, 0});
  CHECK(message_to<Decision>(out, 1)->exit_code == kExitRendezvous);
  CHECK(message_to<Decision>(out, 2) == nullptr);  // nobody to tell
}

TEST_CASE("rdzv state: a node that reported and then left is not lost", "[rdzv]") {
  Job job(settings(2));
  job.join(1, node("a"));
  job.join(2, node("b"));
  job.send(2, Report{0, Outcome::kSucceeded, std::nullopt, 0});
  CHECK(job.state.on_disconnect(2, t0).empty());
  const auto out = job.send(1, Report{0, Outcome::kSucceeded, std::nullopt, 0});
  CHECK(message_to<Decision>(out, 1)->exit_code == 0);
}

TEST_CASE("rdzv state: missed heartbeats count as a lost node", "[rdzv]") {
  Job job(settings(2));
  job.join(1, node("a"));
  job.join(2, node("b"));
  CHECK(message_to<HeartbeatAck>(job.send(1, Heartbeat{}, t0 + 25s), 1) != nullptr);
  CHECK(job.state.on_tick(t0 + 29s).empty());
  const auto out = job.state.on_tick(t0 + 31s);  // node b silent for 31 s, node a for 6 s
  CHECK(error_to(out, 2).code == "heartbeat_timeout");
  const StopWorkers* stop = message_to<StopWorkers>(out, 1);
  REQUIRE(stop != nullptr);
  CHECK_THAT(stop->root_cause.description, Contains("no heartbeat for 30.0 s"));
}

TEST_CASE("rdzv state: a lost node failed when it was last heard from", "[rdzv]") {
  Job job(settings(2));
  job.join(1, node("a"));
  job.join(2, node("b"));
  job.send(2, Heartbeat{}, t0 + 10s);  // node b's last word
  // Node a's worker fails at 20 s because node b is gone (a gloo "Connection reset by peer").
  FailureReport consequence;
  consequence.rank = 0;
  consequence.exit_code = 1;
  consequence.time_ms = (t0 + 20s).wall_ms;
  consequence.description = "exit code 1";
  job.send(1, Report{0, Outcome::kFailed, consequence, 0}, t0 + 20s);
  // Node b's silence is noticed at 41 s; it is still the earlier failure, and the job's code.
  const auto out = job.state.on_tick(t0 + 41s);
  const Decision* d = message_to<Decision>(out, 1);
  REQUIRE(d != nullptr);
  REQUIRE(d->root_cause);
  CHECK(d->root_cause->host == "b");
  CHECK(d->root_cause->time_ms == (t0 + 10s).wall_ms);
  CHECK(d->exit_code == kExitRendezvous);
  CHECK_THAT(d->root_cause->description, Contains("last heard from 31.0 s before"));
}

TEST_CASE("rdzv state: with the default run id, agents running another command are refused",
          "[rdzv]") {
  JobSettings s = settings(2);
  s.check_command = true;
  SECTION("the hosting agent's command is the job's") {
    s.command = "train.py --lr 1";
    Job job(s);
    job.greet(1);
    Join other = join_as(node("b"), std::nullopt, 2);
    other.command = "other.py";
    const auto refused = error_to(job.send(1, other), 1);
    CHECK(refused.code == "job_mismatch");
    CHECK_THAT(refused.message, Contains("runs 'other.py' but this job runs 'train.py --lr 1'") &&
                                    Contains("its own --master-port") && Contains("--rdzv-id"));
  }
  SECTION("without one (npu_run rdzv-server), the first join's") {
    Job job(s);
    job.greet(1);
    Join first = join_as(node("a"), std::nullopt, 2);
    first.command = "a.py";
    CHECK(job.send(1, first).empty());
    job.greet(2);
    Join second = join_as(node("b"), std::nullopt, 2);
    second.command = "b.py";
    CHECK(error_to(job.send(2, second), 2).code == "job_mismatch");
  }
  SECTION("a run id of its own names the job: commands may differ") {
    s.check_command = false;
    s.command = "a.py";
    Job job(s);
    job.greet(1);
    Join other = join_as(node("b"), std::nullopt, 2);
    other.command = "b.py";
    CHECK(job.send(1, other).empty());
  }
}

TEST_CASE("rdzv state: progress names the missing node ranks at a calm rate", "[rdzv]") {
  Job job(settings(4));
  job.join(1, node("a"), 0);
  job.join(2, node("b"), 2);
  CHECK(job.state.on_tick(t0 + 4s).empty());
  const auto out = job.state.on_tick(t0 + 5s);
  const Progress* p = message_to<Progress>(out, 1);
  REQUIRE(p != nullptr);
  CHECK(message_to<Progress>(out, 2) != nullptr);
  CHECK(p->joined == 2);
  CHECK(p->expected == 4);
  CHECK(p->missing_node_ranks == std::vector<int>{1, 3});
  CHECK(out.size() == 1);  // one broadcast shared by all waiting agents
  CHECK(job.state.on_tick(t0 + 6s).empty());
  // With automatic ranks, nobody can say which ranks are missing.
  job.join(3, node("c"));
  const auto later = job.state.on_tick(t0 + 10s);
  CHECK(message_to<Progress>(later, 3)->missing_node_ranks.empty());
}

TEST_CASE("rdzv state: the join timeout names who is missing and ends the job", "[rdzv]") {
  JobSettings s = settings(3);
  s.heartbeat_timeout = 10'000s;
  s.join_timeout = 60s;
  Job job(s);
  job.join(1, node("a"), 0);
  job.join(2, node("b"), 2);
  CHECK(job.state.on_tick(t0 + 59s).size() <= 1);  // at most a progress report
  const auto out = job.state.on_tick(t0 + 61s);
  const auto e = error_to(out, 1);
  CHECK(e.code == "rendezvous_timeout");
  CHECK_THAT(e.message,
             Contains("only 2 of 3 nodes joined within 60 s") && Contains("node ranks 1"));
  CHECK(message_to<ErrorReply>(out, 2) != nullptr);
  CHECK(job.state.phase() == RendezvousState::Phase::kFinished);
  CHECK(job.state.final_decision()->exit_code == kExitRendezvous);
}

TEST_CASE("rdzv state: reports from outsiders and joins during a round are refused", "[rdzv]") {
  Job job(settings(1));
  job.greet(9);
  CHECK(error_to(job.send(9, Report{0, Outcome::kSucceeded, std::nullopt, 0}), 9).code ==
        "protocol_order");
  job.join(1, node("a"));
  CHECK(error_to(job.send(1, join_as(node("a"), std::nullopt, 1)), 1).code == "protocol_order");
}

TEST_CASE("rdzv state: a single node is a job of one", "[rdzv]") {
  Job job(settings(1, 1));
  const auto out = job.join(1, node("solo", 4));
  CHECK(message_to<Assigned>(out, 1)->world_size == 4);
  const auto restart = job.send(1, failed(0, 2, 5));
  CHECK(message_to<Decision>(restart, 1)->action == Action::kRestart);
  job.send(1, join_as(node("solo", 4), std::nullopt, 1, 1));
  const auto done = job.send(1, Report{1, Outcome::kSucceeded, std::nullopt, 0});
  CHECK(message_to<Decision>(done, 1)->exit_code == 0);
}

TEST_CASE("rdzv state: an earlier error reported later becomes the root cause", "[rdzv]") {
  Job job(settings(3));
  job.join(1, node("a"));
  job.join(2, node("b"));
  job.join(3, node("c"));
  Report first = failed(0, 3, 1);  // a rank blocked in a collective, failing at t = 5 s
  first.failure->time_ms = 5000;
  auto out = job.send(2, first);
  REQUIRE(message_to<StopWorkers>(out, 1) != nullptr);
  // Node a was stopped, but its rank 0 had raised at t = 2 s and hung while exiting.
  FailureReport raised;
  raised.rank = 0;
  raised.exit_code = 143;  // npu_run's stop, not the worker's own status
  raised.description = "raised an error, then was stopped by npu_run while exiting";
  raised.time_ms = 2000;
  raised.stopped_after_error = true;
  CHECK(job.send(1, Report{0, Outcome::kStopped, raised, 0}).empty());
  Report later = failed(0, 5, 9);
  later.failure->time_ms = 7000;
  out = job.send(3, later);
  const Decision* d = message_to<Decision>(out, 3);
  REQUIRE(d != nullptr);
  REQUIRE(d->root_cause);
  CHECK(d->root_cause->host == "a");
  CHECK(d->root_cause->rank == 0);
  CHECK(d->root_cause->time_ms == 2000);
  CHECK(d->exit_code == 1);  // the first failure's code: the raised rank never exited on its own
}

TEST_CASE("rdzv state: an earlier error does not replace a stop by signal", "[rdzv]") {
  Job job(settings(2));
  job.join(1, node("a"));
  job.join(2, node("b"));
  Report stopped{0, Outcome::kStopped, std::nullopt, 15};
  job.send(1, stopped);
  Report earlier = failed(0, 2, 1);
  earlier.failure->time_ms = 1000;
  earlier.outcome = Outcome::kStopped;
  const auto out = job.send(2, earlier);
  const Decision* d = message_to<Decision>(out, 2);
  REQUIRE(d != nullptr);
  CHECK(d->exit_code == 143);
  CHECK(d->root_cause->host == "a");
}

namespace {

JobSettings elastic(int min_nodes, int max_nodes, int max_restarts = 0) {
  JobSettings s = settings(max_nodes, max_restarts);
  s.min_nodes = min_nodes;
  s.last_call = 2s;
  return s;
}

// Greets `id` and joins it to an elastic job at `now`.
std::vector<Outgoing> join_elastic(Job& job, ClientId id, const NodeInfo& n, Now now = t0) {
  job.greet(id);
  Join j =
      join_as(n, std::nullopt, job.state.settings().max_nodes, job.state.settings().max_restarts);
  j.min_nodes = job.state.settings().min_nodes;
  return job.send(id, j, now);
}

}  // namespace

TEST_CASE("rdzv elastic: MIN nodes start after the last call and MAX start at once", "[rdzv]") {
  Job job(elastic(2, 4));
  CHECK(join_elastic(job, 1, node("a")).empty());
  CHECK(join_elastic(job, 2, node("b"), t0 + 1s).empty());  // MIN reached: the last call begins
  CHECK(job.state.on_tick(t0 + 2s).empty());
  const auto out = job.state.on_tick(t0 + 3500ms);
  REQUIRE(message_to<Assigned>(out, 1) != nullptr);
  CHECK(message_to<Assigned>(out, 1)->nnodes == 2);
  CHECK(message_to<Assigned>(out, 2)->world_size == 4);  // two workers per node

  Job full(elastic(2, 3));
  join_elastic(full, 1, node("a"));
  join_elastic(full, 2, node("b"));
  const auto all = join_elastic(full, 3, node("c"));
  REQUIRE(message_to<Assigned>(all, 3) != nullptr);
  CHECK(message_to<Assigned>(all, 3)->nnodes == 3);
  CHECK(message_to<Assigned>(all, 3)->node_rank == 2);  // dense, by host name
}

TEST_CASE("rdzv elastic: a lost node re-forms the survivors, a restart --max-restarts does not pay",
          "[rdzv]") {
  Job job(elastic(2, 3, 1));
  join_elastic(job, 1, node("a"));
  join_elastic(job, 2, node("b"));
  join_elastic(job, 3, node("c"));
  auto out = job.state.on_disconnect(2, t0 + 1s);
  REQUIRE(message_to<StopWorkers>(out, 1) != nullptr);
  job.send(1, Report{0, Outcome::kStopped, std::nullopt, 0}, t0 + 1s);
  out = job.send(3, Report{0, Outcome::kStopped, std::nullopt, 0}, t0 + 1s);
  const Decision* d = message_to<Decision>(out, 1);
  REQUIRE(d != nullptr);
  CHECK(d->action == Action::kRestart);
  CHECK(d->restart_count == 1);
  CHECK(d->restarts_charged == 0);  // the node's fault: the job went on without it
  CHECK(d->failure_class == FailureClass::kInfrastructure);
  CHECK_THAT(d->class_reason, Contains("infrastructure: node 1 (b) was lost"));
  CHECK_FALSE(d->membership_change);
  CHECK(message_to<Decision>(out, 2) == nullptr);  // the lost node hears nothing
  Join rejoin = join_as(node("a"), std::nullopt, 3, 1);
  rejoin.min_nodes = 2;
  CHECK(job.send(1, rejoin, t0 + 2s).empty());
  rejoin.node = node("c");
  CHECK(job.send(3, rejoin, t0 + 2s).empty());
  out = job.state.on_tick(t0 + 4500ms);
  const Assigned* a = message_to<Assigned>(out, 3);
  REQUIRE(a != nullptr);
  CHECK(a->nnodes == 2);
  CHECK(a->node_rank == 1);
  CHECK(a->restart_count == 1);
  CHECK(a->round == 1);
}

TEST_CASE("rdzv elastic: below MIN the survivors wait, then time out naming the shortfall",
          "[rdzv]") {
  JobSettings s = elastic(2, 3);
  s.join_timeout = 10s;
  s.max_restarts = 1;
  Job job(s);
  join_elastic(job, 1, node("a"));
  join_elastic(job, 2, node("b"), t0 + 2s);
  job.state.on_tick(t0 + 4500ms);  // round 0 with 2 nodes
  job.state.on_disconnect(2, t0 + 5s);
  const auto out = job.send(1, Report{0, Outcome::kStopped, std::nullopt, 0}, t0 + 5s);
  REQUIRE(message_to<Decision>(out, 1)->action == Action::kRestart);
  Join rejoin = join_as(node("a"), std::nullopt, 3, 1);
  rejoin.min_nodes = 2;
  CHECK(job.send(1, rejoin, t0 + 6s).empty());
  CHECK(job.send(1, Heartbeat{}, t0 + 14s).size() == 1);
  const auto waiting = job.state.on_tick(t0 + 14s);  // one node is below MIN: no round
  CHECK(message_to<Assigned>(waiting, 1) == nullptr);
  CHECK(message_to<ErrorReply>(waiting, 1) == nullptr);
  const auto timeout = job.state.on_tick(t0 + 17s);  // 11 s after the re-join
  CHECK_THAT(error_to(timeout, 1).message, Contains("1 more node(s) to reach the minimum of 2"));
}

TEST_CASE("rdzv elastic: an agent arriving during a round re-forms the job, not counted",
          "[rdzv]") {
  Job job(elastic(2, 3, 0));
  join_elastic(job, 1, node("a"));
  join_elastic(job, 2, node("b"));
  job.state.on_tick(t0 + 2500ms);  // round 0 with a and b
  auto out = join_elastic(job, 3, node("c"), t0 + 3s);
  const Reform* reform = message_to<Reform>(out, 1);
  REQUIRE(reform != nullptr);
  CHECK(message_to<Reform>(out, 2) != nullptr);
  CHECK(message_to<StopWorkers>(out, 1) == nullptr);  // not a failure
  CHECK(reform->host == "c");
  CHECK(reform->node_rank == -1);
  CHECK(reform->reason == "the job re-forms as round 1 to add c (3 nodes)");
  CHECK(message_to<Reform>(out, 3) == nullptr);
  // A stopped node's workers may die with errors of their own: that is the stop, not a failure.
  Report stopped{0, Outcome::kStopped, FailureReport{}, 0};
  stopped.failure->time_ms = 1;
  job.send(1, stopped, t0 + 3s);
  out = job.send(2, Report{0, Outcome::kStopped, std::nullopt, 0}, t0 + 3s);
  const Decision* d = message_to<Decision>(out, 2);
  REQUIRE(d != nullptr);
  CHECK(d->action == Action::kRestart);  // even with --max-restarts 0
  CHECK(d->membership_change);
  CHECK(d->restart_count == 0);
  Join rejoin = join_as(node("a"), std::nullopt, 3, 0);
  rejoin.min_nodes = 2;
  job.send(1, rejoin, t0 + 4s);
  rejoin.node = node("b");
  out = job.send(2, rejoin, t0 + 4s);  // with c waiting since t0 + 3 s: all MAX=3 are in
  const Assigned* a = message_to<Assigned>(out, 3);
  REQUIRE(a != nullptr);
  CHECK(a->nnodes == 3);
  CHECK(a->restart_count == 0);
  // A fourth agent finds the job full.
  CHECK(error_to(join_elastic(job, 4, node("d"), t0 + 5s), 4).code == "job_full");
}

TEST_CASE("rdzv elastic: a node leaving on purpose re-forms the others, a static job ends",
          "[rdzv]") {
  Job job(elastic(1, 3));
  join_elastic(job, 1, node("a"));
  join_elastic(job, 2, node("b"));
  job.state.on_tick(t0 + 2500ms);
  Report leaving{0, Outcome::kStopped, std::nullopt, 15};
  leaving.leaving = true;
  auto out = job.send(2, leaving, t0 + 3s);
  const Reform* reform = message_to<Reform>(out, 1);
  REQUIRE(reform != nullptr);
  CHECK(reform->host == "b");
  CHECK(reform->node_rank == 1);
  CHECK_THAT(reform->reason, Contains("left the job") && Contains("signal 15"));
  CHECK(message_to<Reform>(out, 2) == nullptr);  // it is leaving
  out = job.send(1, Report{0, Outcome::kStopped, std::nullopt, 0}, t0 + 3s);
  const Decision* d = message_to<Decision>(out, 1);
  REQUIRE(d != nullptr);
  CHECK(d->action == Action::kRestart);
  CHECK(d->membership_change);
  CHECK(message_to<Decision>(out, 2) == nullptr);

  Job fixed(settings(2, 3));
  fixed.join(1, node("a"));
  fixed.join(2, node("b"));
  fixed.send(2, leaving);
  out = fixed.send(1, Report{0, Outcome::kStopped, std::nullopt, 0});
  CHECK(message_to<Decision>(out, 1)->action == Action::kFinish);
  CHECK(message_to<Decision>(out, 1)->exit_code == 143);
}

namespace {

// Node a's worker raised `exception` at `frame`; node b was stopped for it. The decision.
Decision fail_round(Job& job, const std::string& exception, const std::string& frame,
                    bool early = false) {
  Report failure = failed(job.state.round(), 0, 1);
  failure.failure->evidence.exception = exception;
  failure.failure->evidence.frame = frame;
  failure.failure->evidence.last_beat = "step 3";
  failure.failure->evidence.early = early;
  job.send(1, failure);
  const auto out = job.send(2, Report{job.state.round(), Outcome::kStopped, std::nullopt, 0});
  const Decision* d = message_to<Decision>(out, 1);
  REQUIRE(d != nullptr);
  return *d;
}

void rejoin_both(Job& job) {
  const int nodes = job.state.settings().max_nodes;
  const int restarts = job.state.settings().max_restarts;
  job.send(2, join_as(node("b"), std::nullopt, nodes, restarts));
  job.send(1, join_as(node("a"), std::nullopt, nodes, restarts));
}

}  // namespace

TEST_CASE("rdzv state: the same exception at the same place twice stops the job with 123",
          "[rdzv][classify]") {
  Job job(settings(2, 5));
  job.join(1, node("a"));
  job.join(2, node("b"));
  Decision d = fail_round(job, "ValueError", "train.py:88 in step");
  CHECK(d.action == Action::kRestart);
  CHECK(d.failure_class == FailureClass::kOther);
  CHECK(d.restarts_charged == 1);
  rejoin_both(job);
  d = fail_round(job, "ValueError", "train.py:88 in step");
  CHECK(d.action == Action::kFinish);
  CHECK(d.exit_code == npu_run::kExitNoProgress);
  CHECK(d.failure_class == FailureClass::kDeterministic);
  CHECK(d.class_reason ==
        "deterministic: ValueError at train.py:88 in step after beat 'step 3', twice");
  CHECK(d.root_cause->exit_code == 1);  // the failure itself is still named
}

TEST_CASE("rdzv state: another place, or a round in between that re-formed, is not the same",
          "[rdzv][classify]") {
  Job job(settings(2, 5));
  job.join(1, node("a"));
  job.join(2, node("b"));
  fail_round(job, "ValueError", "train.py:88 in step");
  rejoin_both(job);
  Decision d = fail_round(job, "ValueError", "train.py:90 in step");
  CHECK(d.action == Action::kRestart);
  CHECK(d.failure_class == FailureClass::kOther);
  rejoin_both(job);
  d = fail_round(job, "KeyError", "train.py:90 in step");
  CHECK(d.action == Action::kRestart);
  CHECK(d.restarts_charged == 3);
}

TEST_CASE("rdzv state: an ImportError at start stops the job at once with 123",
          "[rdzv][classify]") {
  Job job(settings(2, 5));
  job.join(1, node("a"));
  job.join(2, node("b"));
  const Decision d = fail_round(job, "ModuleNotFoundError", "train.py:3 in <module>", true);
  CHECK(d.action == Action::kFinish);
  CHECK(d.exit_code == npu_run::kExitNoProgress);
  CHECK(d.class_reason == "deterministic: ModuleNotFoundError at train.py:3 in <module> at start");
  CHECK(d.restart_count == 0);
}

TEST_CASE("rdzv state: a device fault of a static job without spares costs a restart as before",
          "[rdzv][classify]") {
  Job job(settings(2, 1));
  job.join(1, node("a"));
  job.join(2, node("b"));
  Report failure = failed(0, 0, 1);
  failure.failure->evidence.fault = "HCCL could not set up a link to a peer in time (EI0006): x";
  job.send(1, failure);
  const auto out = job.send(2, Report{0, Outcome::kStopped, std::nullopt, 0});
  const Decision* d = message_to<Decision>(out, 1);
  REQUIRE(d != nullptr);
  CHECK(d->action == Action::kRestart);
  CHECK(d->failure_class == FailureClass::kInfrastructure);
  CHECK(d->restarts_charged == 1);
}

// ---- spares (--spares) ----

namespace {

JobSettings with_spares(int nodes, int spares, int max_restarts = 0) {
  JobSettings s = settings(nodes, max_restarts);
  s.spares = spares;
  return s;
}

// Joins `id` on `host` to a job with spares; the answer.
std::vector<Outgoing> join_spare_job(Job& job, ClientId id, const std::string& host,
                                     const std::string& affinity = "",
                                     std::optional<int> rank = std::nullopt) {
  job.greet(id);
  Join j =
      join_as(node(host), rank, job.state.settings().max_nodes, job.state.settings().max_restarts);
  j.spares = job.state.settings().spares;
  j.affinity = affinity;
  return job.send(id, j);
}

Join rejoin_of(const Job& job, const std::string& host) {
  Join j = join_as(node(host), std::nullopt, job.state.settings().max_nodes,
                   job.state.settings().max_restarts);
  j.spares = job.state.settings().spares;
  return j;
}

// Nodes a (1), b (2) run; c (3) stands by. Loses b; a reports. The decision, to a.
Decision lose_b(Job& job) {
  auto out = job.state.on_disconnect(2, t0 + 1s);
  REQUIRE(message_to<StopWorkers>(out, 1) != nullptr);
  out = job.send(1, Report{job.state.round(), Outcome::kStopped, std::nullopt, 0}, t0 + 1s);
  const Decision* d = message_to<Decision>(out, 1);
  REQUIRE(d != nullptr);
  return *d;
}

}  // namespace

TEST_CASE("rdzv spares: agents beyond the job's nodes stand by, and the job ends without them",
          "[rdzv][spares]") {
  Job job(with_spares(2, 1));
  join_spare_job(job, 1, "a");
  const auto formed = join_spare_job(job, 2, "b");
  REQUIRE(message_to<Assigned>(formed, 2) != nullptr);
  const auto standby = join_spare_job(job, 3, "c");
  const Standby* s = message_to<Standby>(standby, 3);
  REQUIRE(s != nullptr);
  CHECK(s->nodes == 2);
  CHECK(s->spares == 1);
  const JobStatus status = job.state.status(t0);
  REQUIRE(status.nodes.size() == 3);
  CHECK(status.nodes[2].host == "c");
  CHECK(status.nodes[2].state == "spare");
  // One more is one too many.
  const auto full = join_spare_job(job, 4, "d");
  CHECK_THAT(error_to(full, 4).message, Contains("and 1 spares") && Contains("--spares"));
  // The job ends: the spare is dismissed with 0.
  job.send(1, Report{0, Outcome::kSucceeded, std::nullopt, 0});
  const auto out = job.send(2, Report{0, Outcome::kSucceeded, std::nullopt, 0});
  const Dismissed* dismissed = message_to<Dismissed>(out, 3);
  REQUIRE(dismissed != nullptr);
  CHECK(dismissed->exit_code == 0);
  CHECK_THAT(dismissed->reason, Contains("without needing this spare"));
}

TEST_CASE("rdzv spares: a lost node's seat goes to the spare, no other rank moves, no restart paid",
          "[rdzv][spares]") {
  Job job(with_spares(3, 1));
  join_spare_job(job, 1, "a");
  join_spare_job(job, 2, "b");
  join_spare_job(job, 5, "e");  // node 2 by host order
  join_spare_job(job, 3, "c");  // the spare: it came after the round formed
  auto out = job.state.on_disconnect(2, t0 + 1s);
  job.send(1, Report{0, Outcome::kStopped, std::nullopt, 0}, t0 + 1s);
  out = job.send(5, Report{0, Outcome::kStopped, std::nullopt, 0}, t0 + 1s);
  const Decision* d = message_to<Decision>(out, 1);
  REQUIRE(d != nullptr);
  CHECK(d->action == Action::kRestart);
  CHECK(d->restart_count == 1);
  CHECK(d->restarts_charged == 0);
  CHECK(d->failure_class == FailureClass::kInfrastructure);
  const std::vector<TakenOut> taken = job.state.take_taken_out();
  REQUIRE(taken.size() == 1);
  CHECK(taken[0].host == "b");
  CHECK(taken[0].reason == "lost");
  CHECK(taken[0].node_rank == 1);
  // Node e re-joins first: its seat (2) is kept whatever the order.
  CHECK(job.send(5, rejoin_of(job, "e"), t0 + 2s).empty());
  out = job.send(1, rejoin_of(job, "a"), t0 + 2s);
  const Assigned* spare = message_to<Assigned>(out, 3);
  REQUIRE(spare != nullptr);
  CHECK(spare->node_rank == 1);
  CHECK(spare->rank_offset == 2);
  CHECK(spare->restart_count == 1);
  CHECK(message_to<Assigned>(out, 1)->node_rank == 0);
  CHECK(message_to<Assigned>(out, 5)->node_rank == 2);
  CHECK(message_to<Assigned>(out, 5)->rank_offset == 4);
  // A host of a node taken out does not come back in this job.
  const auto back = join_spare_job(job, 6, "b");
  CHECK(error_to(back, 6).code == "ledgered");
}

TEST_CASE("rdzv spares: a node whose agent was signalled leaves its seat to a ready spare",
          "[rdzv][spares]") {
  for (const bool spare_ready : {true, false}) {
    Job job(with_spares(2, 1));
    join_spare_job(job, 1, "a");
    join_spare_job(job, 2, "b");
    if (spare_ready) join_spare_job(job, 3, "c");
    // b's agent got SIGTERM (its ssh session was lost) and leaves.
    Report leaving{0, Outcome::kStopped, std::nullopt, 15};
    leaving.leaving = true;
    auto out = job.send(2, leaving, t0 + 1s);
    REQUIRE(message_to<StopWorkers>(out, 1) != nullptr);
    out = job.send(1, Report{0, Outcome::kStopped, std::nullopt, 0}, t0 + 1s);
    const Decision* d = message_to<Decision>(out, 1);
    REQUIRE(d != nullptr);
    if (!spare_ready) {  // a deliberate stop, as ever: the job ends with the signal's code
      CHECK(d->action == Action::kFinish);
      CHECK(d->exit_code == 143);
      continue;
    }
    CHECK(d->action == Action::kRestart);
    CHECK(d->restarts_charged == 0);
    CHECK(d->failure_class == FailureClass::kInfrastructure);
    CHECK(job.state.take_taken_out().empty());  // it left: not ledgered
    out = job.send(1, rejoin_of(job, "a"), t0 + 2s);
    const Assigned* spare = message_to<Assigned>(out, 3);
    REQUIRE(spare != nullptr);
    CHECK(spare->node_rank == 1);
    CHECK(message_to<Assigned>(out, 1)->node_rank == 0);
  }
}

TEST_CASE("rdzv spares: with no spare left a static job's lost node costs a restart, then 125",
          "[rdzv][spares]") {
  Job job(with_spares(2, 1));
  join_spare_job(job, 1, "a");
  join_spare_job(job, 2, "b");
  const Decision d = lose_b(job);  // nobody stands by yet
  CHECK(d.action == Action::kFinish);
  CHECK(d.exit_code == npu_run::kExitRendezvous);
  CHECK_THAT(d.class_reason, Contains("was lost; no spare is left to take its place"));
  CHECK(job.state.take_taken_out().empty());  // not taken out: the job ended with it
}

TEST_CASE("rdzv spares: a device fault takes its node out for the spare", "[rdzv][spares]") {
  Job job(with_spares(2, 1, 0));
  join_spare_job(job, 1, "a");
  join_spare_job(job, 2, "b");
  join_spare_job(job, 3, "c");
  Report fault = failed(0, 3, 1);
  fault.failure->evidence.fault = "HCCS link error between devices: HCCS LINK ERROR";
  job.send(2, fault);
  const auto out = job.send(1, Report{0, Outcome::kStopped, std::nullopt, 0});
  const Dismissed* dismissed = message_to<Dismissed>(out, 2);
  REQUIRE(dismissed != nullptr);
  CHECK(dismissed->exit_code == 0);
  CHECK_THAT(dismissed->reason, Contains("node 1 (b) is taken out of the job: HCCS link error") &&
                                    Contains("a spare takes its seat"));
  CHECK(message_to<Decision>(out, 2) == nullptr);
  CHECK(message_to<Decision>(out, 1)->restarts_charged == 0);
  const auto assigned = job.send(1, rejoin_of(job, "a"));
  REQUIRE(message_to<Assigned>(assigned, 3) != nullptr);
  CHECK(message_to<Assigned>(assigned, 3)->node_rank == 1);
}

TEST_CASE("rdzv spares: a spare with the lost node's affinity takes its seat", "[rdzv][spares]") {
  Job job(with_spares(2, 2));
  join_spare_job(job, 1, "a", "rack1");
  join_spare_job(job, 2, "b", "rack2");
  join_spare_job(job, 3, "c", "rack1");
  join_spare_job(job, 4, "d", "rack2");
  lose_b(job);
  const auto out = job.send(1, rejoin_of(job, "a"), t0 + 2s);
  REQUIRE(message_to<Assigned>(out, 4) != nullptr);
  CHECK(message_to<Assigned>(out, 4)->node_rank == 1);
  CHECK(message_to<Assigned>(out, 3) == nullptr);  // c still stands by
}

TEST_CASE("rdzv spares: named spares (--node-rank past --nnodes) stand by first",
          "[rdzv][spares]") {
  Job job(with_spares(2, 1));
  join_spare_job(job, 1, "a", "", 2);  // the spare's rank, though it came first
  join_spare_job(job, 2, "b");
  const auto out = join_spare_job(job, 3, "c");
  CHECK(message_to<Standby>(out, 1) != nullptr);
  CHECK(message_to<Assigned>(out, 2)->node_rank == 0);
  CHECK(message_to<Assigned>(out, 3)->node_rank == 1);
  Job other(with_spares(2, 1));
  const auto beyond = join_spare_job(other, 1, "a", "", 3);
  CHECK_THAT(error_to(beyond, 1).message, Contains("--nnodes 2 and --spares 1: node ranks run "
                                                   "from 0 to 2"));
  Job mismatch(with_spares(2, 1));
  mismatch.greet(1);
  CHECK(error_to(mismatch.send(1, join_as(node("a"), std::nullopt, 2)), 1).code ==
        "spares_mismatch");
}

TEST_CASE("rdzv spares: a node failing its health gate at a restart is taken out for the spare",
          "[rdzv][spares]") {
  Job job(with_spares(2, 1, 1));
  for (const auto& [id, host] : {std::pair{1, "a"}, std::pair{2, "b"}, std::pair{3, "c"}}) {
    job.greet(static_cast<ClientId>(id));
    Join j = rejoin_of(job, host);
    j.health = HealthMode::kGate;
    job.send(static_cast<ClientId>(id), j);
    job.send(static_cast<ClientId>(id), HealthReport{NodeVerdict{}});
  }
  job.send(1, failed(0, 0, 1));
  job.send(2, Report{0, Outcome::kStopped, std::nullopt, 0});
  Join a = rejoin_of(job, "a");
  a.health = HealthMode::kGate;
  job.send(1, a);
  job.send(1, HealthReport{NodeVerdict{}});
  Join b = rejoin_of(job, "b");
  b.health = HealthMode::kGate;
  job.send(2, b);
  NodeVerdict bad;
  bad.findings.push_back({"npu-smi health", 3, HealthStatus::kFail, "Alarm", {}});
  const auto out = job.send(2, HealthReport{bad});
  const Dismissed* dismissed = message_to<Dismissed>(out, 2);
  REQUIRE(dismissed != nullptr);
  CHECK_THAT(dismissed->reason, Contains("failed its health gate"));
  REQUIRE(message_to<Assigned>(out, 3) != nullptr);
  CHECK(message_to<Assigned>(out, 3)->node_rank == 1);
  CHECK(message_to<Assigned>(out, 1)->node_rank == 0);
  const auto taken = job.state.take_taken_out();
  REQUIRE(taken.size() == 1);
  CHECK(taken[0].reason == "failed its health gate");
}

TEST_CASE("rdzv spares: a host in the ledger of bad nodes is refused, naming the entry",
          "[rdzv][spares]") {
  JobSettings s = with_spares(2, 1);
  s.ledger["d"] = "lost at 2026-11-26 04:10:00 UTC in job 'x'";
  Job job(s);
  const auto out = join_spare_job(job, 1, "d");
  const ErrorReply e = error_to(out, 1);
  CHECK(e.code == "ledgered");
  CHECK_THAT(e.message, Contains("d is in the ledger of bad nodes (lost at 2026-11-26") &&
                            Contains("npu_run ledger clear d"));
}

TEST_CASE("rdzv spares: two nodes lost in one round with one spare: a static job cannot go on",
          "[rdzv][spares]") {
  Job job(with_spares(3, 1));
  join_spare_job(job, 1, "a");
  join_spare_job(job, 2, "b");
  join_spare_job(job, 5, "e");
  join_spare_job(job, 3, "c");
  job.state.on_disconnect(2, t0 + 1s);
  job.state.on_disconnect(5, t0 + 1s);
  const auto out = job.send(1, Report{0, Outcome::kStopped, std::nullopt, 0}, t0 + 1s);
  const Decision* d = message_to<Decision>(out, 1);
  REQUIRE(d != nullptr);
  CHECK(d->action == Action::kFinish);
  CHECK(d->exit_code == npu_run::kExitRendezvous);
  CHECK_THAT(d->class_reason, Contains("no spare is left to take its place"));
}

TEST_CASE("rdzv memory: a successor continues the job: round, restarts, the last root cause",
          "[rdzv][etcd]") {
  JobSettings two = settings(2, 3);
  two.min_nodes = 1;  // elastic 1:2, as a job that survives its leader is
  Job job(two);
  const auto start = [&](Job& j, bool greet = true) {
    if (greet) {
      j.greet(1);
      j.greet(2);
    }
    Join a = join_as(node("a"), std::nullopt, 2, 3);
    Join b = join_as(node("b"), std::nullopt, 2, 3);
    a.min_nodes = b.min_nodes = 1;
    j.send(1, a);
    return j.send(2, b);
  };
  start(job);
  job.send(1, failed(0, 0, 3));
  job.send(2, Report{0, Outcome::kStopped, std::nullopt, 0});
  REQUIRE(job.state.round() == 1);
  start(job, false);  // round 1 runs, restart 1, when its leader is lost
  const JobMemory running = job.state.memory();
  CHECK(running.round == 1);
  CHECK(running.round_running);
  CHECK(running.restart_count == 1);
  CHECK(running.charged_restarts == 1);

  // Through its JSON, as etcd keeps it; a successor's round is the next, its restart the next.
  JobMemory kept = memory_from(nlohmann::json::parse(to_json(running).dump()));
  kept.leader_host = "a";
  const JobMemory next = successor_memory(kept, t0.wall_ms);
  CHECK(next.round == 2);
  CHECK(next.restart_count == 2);
  CHECK_FALSE(next.round_running);
  CHECK(next.charged_restarts == 1);  // the leader's loss costs nothing of --max-restarts
  REQUIRE(next.previous_failure);
  CHECK(next.previous_failure->lost);
  CHECK_THAT(next.previous_failure->description, Contains("the rendezvous leader on a was lost"));

  Job successor(two);
  successor.state.resume(next);
  const auto assigned = start(successor);
  REQUIRE(message_to<Assigned>(assigned, 1) != nullptr);
  CHECK(message_to<Assigned>(assigned, 1)->round == 2);
  CHECK(message_to<Assigned>(assigned, 1)->restart_count == 2);

  // A round still forming when its leader went goes on forming: no restart.
  Job forming(two);
  const JobMemory waiting = forming.state.memory();
  CHECK_FALSE(waiting.round_running);
  CHECK(successor_memory(waiting, t0.wall_ms).round == 0);
  CHECK(successor_memory(waiting, t0.wall_ms).restart_count == 0);
  // What etcd hands back is checked as a message would be.
  CHECK_THROWS_WITH(memory_from(nlohmann::json{{"round", "x"}}),
                    Contains("'round' is not an integer"));
}

TEST_CASE(
    "rdzv memory: a successor gives each agent its seat back and the lost leader's to a "
    "spare, so no other rank moves",
    "[rdzv][etcd][spares]") {
  const auto join_agent = [](Job& job, ClientId id, const std::string& host) {
    job.greet(id);
    Join j = join_as(node(host), std::nullopt, 3, 0);
    j.spares = 1;
    j.agent = host + "-" + std::to_string(id);
    return job.send(id, j);
  };
  Job job(with_spares(3, 1));
  join_agent(job, 1, "a");  // the leader, node 0
  join_agent(job, 2, "b");
  join_agent(job, 3, "e");
  join_agent(job, 4, "z");  // the spare
  const JobMemory running = job.state.memory();
  REQUIRE(running.seats.size() == 3);
  CHECK(running.seats[1].agent == "b-2");
  CHECK(running.seats[2].host == "e");
  JobMemory kept = memory_from(nlohmann::json::parse(to_json(running).dump()));
  kept.leader_host = "a";
  Job successor(with_spares(3, 1));
  successor.state.resume(successor_memory(kept, t0.wall_ms));
  // The same agents, through new connections, in any order: b and e keep 1 and 2, and the spare
  // takes the lost leader's seat 0 (by host order alone b, e, z would be 0, 1, 2).
  join_agent(successor, 3, "e");
  join_agent(successor, 4, "z");
  const auto formed = join_agent(successor, 2, "b");
  REQUIRE(message_to<Assigned>(formed, 4) != nullptr);
  CHECK(message_to<Assigned>(formed, 4)->node_rank == 0);
  CHECK(message_to<Assigned>(formed, 2)->node_rank == 1);
  CHECK(message_to<Assigned>(formed, 3)->node_rank == 2);
  CHECK(message_to<Assigned>(formed, 3)->restart_count == 1);
  // A memory naming more seats than a job can have is not this job's.
  nlohmann::json huge = to_json(running);
  huge["seats"] = nlohmann::json::array();
  for (size_t i = 0; i <= kMaxRememberedSeats; ++i) huge["seats"].push_back(huge["seats"].size());
  CHECK_THROWS_WITH(memory_from(huge), Contains("seats"));
}

TEST_CASE("rdzv memory: a leader asks which agents said lately that they reach etcd",
          "[rdzv][etcd]") {
  Job job(settings(2));
  job.join(1, node("a"));
  job.join(2, node("b"));
  Heartbeat reaches{0};
  reaches.etcd = true;
  Heartbeat cut_off{0};
  cut_off.etcd = false;
  job.send(1, reaches, t0 + 1s);
  job.send(2, reaches, t0 + 2s);
  CHECK(job.state.clients_reaching_etcd(t0.steady) == 2);
  CHECK(job.state.clients_reaching_etcd((t0 + 1500ms).steady) == 1);  // only the fresh one
  job.send(2, cut_off, t0 + 3s);
  CHECK(job.state.clients_reaching_etcd(t0.steady) == 1);
  job.send(1, Heartbeat{0}, t0 + 4s);  // says nothing of etcd: its last word stands
  CHECK(job.state.clients_reaching_etcd(t0.steady) == 1);
}

}  // namespace test_rdzv_state
