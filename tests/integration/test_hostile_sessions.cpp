// The rendezvous server under hostile connections while a real two-node job forms on it
// (tests/support/hostile_job.hpp), from peers that speak the protocol: resets at a high rate,
// frames out of order, a real agent's hello duplicated, a peer that never reads, descriptors
// run out; and --metrics-port's slow and foreign clients.
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <csignal>
#include <fstream>
#include <functional>
#include <random>
#include <thread>

#include "rendezvous/protocol/auth.hpp"
#include "rendezvous/protocol/protocol.hpp"
#include "store/wire.hpp"
#include "support/fixtures.hpp"
#include "support/harness.hpp"
#include "support/hostile_job.hpp"
#include "support/nodes.hpp"
#include "support/raw_peer.hpp"
#include "support/temp_dir.hpp"

namespace test_hostile_sessions {

using namespace npu_run::testing;
using namespace npu_run::testing::hostile;
using namespace npu_run::rdzv;
using Catch::Matchers::Contains;

TEST_CASE("hostile peers: connections opened and reset at a high rate", "[integration][hostile]") {
  job_survives([](int port, Problems& problems) {
    for (int i = 0; i < 3000; ++i) {
      Raw r(port);
      if (i % 2 == 0) r.send(encode_frame(encode(ClientMessage{real_hello()})));
      r.reset();
    }
    server_still_answers(port, problems);
  });
}

TEST_CASE("hostile peers: valid frames in the wrong order", "[integration][hostile]") {
  job_survives([](int port, Problems& problems) {
    Join join;
    join.node.host = "intruder";
    join.node.addr = "127.0.0.1";
    join.node.devices = {0};
    join.node.worker_port = 1;
    Report report;
    report.outcome = Outcome::kSucceeded;
    const std::vector<std::pair<std::vector<ClientMessage>, std::string>> cases = {
        {{join}, "protocol_order"},
        {{report}, "protocol_order"},
        {{Heartbeat{}}, "protocol_order"},
        {{Auth{std::string(64, '0')}}, "protocol_order"},
        {{real_hello(), real_hello()}, "protocol_order"},
        {{real_hello(), join}, "protocol_order"},
        {{Hello{kMagic, 1, "none", ""}}, "version_mismatch"},
        {{Hello{kMagic, kProtocolVersion, "other-job", ""}}, "run_id_mismatch"},
        {{Hello{"http", kProtocolVersion, "none", ""}}, "bad_magic"},
    };
    for (const auto& [messages, code] : cases) {
      Raw peer(port);
      std::string sent;
      for (const ClientMessage& m : messages) {
        peer.send(m);
        sent += std::string(message_name(m)) + " ";
      }
      std::string got = peer.error_code();
      if (got == "(no error reply)") got = "nothing";
      // A hello first is answered with a challenge; the refusal follows it.
      if (std::holds_alternative<Hello>(messages.front()) && messages.size() > 1)
        got = peer.error_code();
      expect(got == code, sent + "got " + got + ", not " + code, problems);
      expect(peer.closed_within(2s), sent + "left the connection open", problems);
    }
    server_still_answers(port, problems);
  });
}

TEST_CASE("hostile peers: duplicates of a real agent's hello", "[integration][hostile]") {
  job_survives([](int port, Problems& problems) {
    // The same hello, as a replay would send it, gets a fresh challenge every time ...
    std::vector<Raw> copies;
    std::vector<std::string> nonces;
    for (int i = 0; i < 20; ++i) {
      copies.emplace_back(port);
      copies.back().send(real_hello());
      const auto m = copies.back().reply();
      const auto* c = m ? std::get_if<Challenge>(&*m) : nullptr;
      expect(c != nullptr, "a duplicate hello got no challenge", problems);
      if (c) nonces.push_back(c->nonce);
    }
    std::vector<std::string> sorted = nonces;  // nonces[i] stays connection i's
    std::sort(sorted.begin(), sorted.end());
    expect(std::unique(sorted.begin(), sorted.end()) == sorted.end(),
           "two connections got the same challenge", problems);
    // ... so a proof recorded on one connection is refused on another,
    if (nonces.size() == copies.size()) {
      copies[1].send(Auth{agent_proof(kToken, "none", nonces[0], std::string(64, 'a'))});
      const std::string replayed = copies[1].error_code();
      expect(replayed == "bad_token", "a replayed proof got " + replayed, problems);
    }
    // and a guess is refused too.
    copies[2].send(Auth{std::string(64, 'f')});
    expect(copies[2].error_code() == "bad_token", "a guessed proof was not refused", problems);
    server_still_answers(port, problems);
  });
}

TEST_CASE("hostile peers: a welcomed peer that streams heartbeats and never reads",
          "[integration][hostile]") {
  job_survives([](int port, pid_t node0, Problems& problems) {
    Raw peer(port);
    const std::string nonce(64, 'b');
    peer.send(real_hello(nonce));
    const auto m = peer.reply();
    const auto* challenge = m ? std::get_if<Challenge>(&*m) : nullptr;
    expect(challenge != nullptr, "the spammer's hello got no challenge", problems);
    if (challenge == nullptr) return;
    peer.send(Auth{agent_proof(kToken, "none", challenge->nonce, nonce)});
    const auto welcome = peer.reply();
    expect(welcome && std::holds_alternative<Welcome>(*welcome), "the spammer was not welcomed",
           problems);
    // From now on nothing is read: every ack the server queued would stay in its memory.
    std::string burst;
    for (int i = 0; i < 10'000; ++i) burst += encode_frame(encode(ClientMessage{Heartbeat{}}));
    const long before = resident_kib(node0);
    int bursts = 0;
    // Sanitized builds check no memory (see above) and run several times slower: a tenth will do.
    const int most = kResidentSizeMeansLiveMemory ? 50 : 5;
    for (; bursts < most && peer.send(burst); ++bursts) {
    }
    std::this_thread::sleep_for(500ms);  // the server reads what is still in flight
    const long growth_mib = (resident_kib(node0) - before) / 1024;
    // Half a million heartbeats: acks queued one by one would take about 65 MiB.
    expect(!kResidentSizeMeansLiveMemory || growth_mib < 32,
           "node 0 grew by " + std::to_string(growth_mib) + " MiB under " + std::to_string(bursts) +
               " x 10,000 heartbeats it could not answer",
           problems);
    server_still_answers(port, problems);
  });
}

TEST_CASE("hostile peers: out of descriptors, node 0 says so once per 10 s with the fix",
          "[integration][hostile]") {
  // Sanitizer runtimes need descriptors of their own to report and check (UBSan reads
  // /proc/self/maps to check a vptr, and reports a false "invalid vptr" when it cannot): out of
  // descriptors they fail, not npu_run. The normal build runs this test.
  if (kSanitized) return;
  // Node 0 with at most 80 descriptors (enough to start, 64 + 16 for its one worker), run by an
  // outer npu_run through prlimit so that the test keeps its own limit; 300 connections then
  // exhaust them and accept() fails with EMFILE for as long as they stay open.
  const int port = unused_port();
  NpuRunProcess outer({"--no-python", "/usr/bin/prlimit", "--nofile=80", npu_run_binary(),
                       "--nnodes", "2", "--node-rank", "0", "--master-port", std::to_string(port),
                       "--rdzv-timeout", "4", "--no-python", "/bin/true"});
  outer.wait_for_output("rendezvous server on", 1, 20s, true);
  {
    std::vector<Raw> flood;
    for (int i = 0; i < 300; ++i) flood.emplace_back(port);
    std::this_thread::sleep_for(2500ms);  // 25 retries of accept, 100 ms apart
  }
  const Finished f = outer.wait(30s);
  INFO(f.err);
  CHECK(f.exit_code == 125);  // node 1 never came
  size_t said = 0;
  for (auto at = f.err.find("cannot accept connections"); at != std::string::npos;
       at = f.err.find("cannot accept connections", at + 1))
    ++said;
  CHECK(said == 1);
  CHECK_THAT(f.err, Contains("Too many open files (EMFILE: this process may open 80 files); "
                             "raise the limit for npu_run"));
  require_no_strays(outer);
}

TEST_CASE(
    "hostile peers: slow, oversized and foreign clients of --metrics-port never delay "
    "the job",
    "[integration][hostile][metrics][kernel-neutral]") {
  TempDir dir;
  const int port = unused_port();
  for (const char* rank : {"0", "1"}) make_gate(dir.file(std::string("gate.") + rank));
  NpuRunProcess job({"--nproc-per-node", "2", "--metrics-port", "127.0.0.1:" + std::to_string(port),
                     "--no-python", "/bin/sh", "-c",
                     "echo running; read x < \"$OUT/gate.$RANK\"; echo done-$RANK"},
                    {{"OUT", dir.path()}});
  job.wait_for_output("running", 2, 30s);
  // Slowloris: requests that never end, more of them than the responder keeps.
  std::vector<Raw> slow;
  for (int i = 0; i < 40; ++i) {
    slow.emplace_back(port);
    slow.back().send("GET /metrics HTTP/1.1\r\nHost: x\r\nX-Slow: ");
  }
  Raw huge(port);  // a header past the 8 KiB limit
  huge.send("GET /metrics HTTP/1.1\r\nX-Big: " + std::string(size_t{64} * 1024, 'a'));
  Raw foreign(port);  // a TLS client hello: not HTTP at all
  foreign.send(std::string("\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03", 11) +
               std::string(500, '\x5a'));
  // A real scrape is still answered at once: the newest connection is served, the oldest went.
  Raw scrape(port);
  scrape.send("GET /metrics HTTP/1.0\r\n\r\n");
  const auto answer = scrape.read_bytes(15, 3s);
  REQUIRE(answer);
  CHECK(answer->rfind("HTTP/1.0 200 OK", 0) == 0);
  CHECK(huge.closed_within(3s));
  CHECK(foreign.closed_within(3s));
  size_t closed = 0;
  for (Raw& r : slow) closed += r.closed_within(7s) ? 1 : 0;
  CHECK(closed == slow.size());  // the deadline (5 s) takes those the cap did not
  const auto started = std::chrono::steady_clock::now();
  open_gate(dir.file("gate.0"));
  open_gate(dir.file("gate.1"));
  const Finished f = job.wait(30s);
  INFO(f.err);
  CHECK(f.exit_code == 0);
  CHECK(std::chrono::steady_clock::now() - started < 5s);
  require_no_strays(job);
}

}  // namespace test_hostile_sessions
