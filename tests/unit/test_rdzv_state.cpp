// The rendezvous state machine, driven directly: the handshake (magic, version, run id, the
// token's challenge) and the seats (node ranks, rank offsets, the peer table, conflicts).
#include <catch2/catch.hpp>

#include "rendezvous/protocol/auth.hpp"
#include "rendezvous/state/state.hpp"
#include "support/rdzv_job.hpp"

namespace test_rdzv_state {

using namespace npu_run::rdzv;
using namespace npu_run::testing::rdzv_job;
using Catch::Matchers::Contains;
using npu_run::testing::message_to;
using namespace std::chrono_literals;

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

}  // namespace test_rdzv_state
