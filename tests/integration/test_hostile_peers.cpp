// The rendezvous server under hostile connections while a real two-node job forms on it: each
// case attacks node 0's server from a thread, checks how the server treats the attacker, and
// requires that the job still completes on both nodes with nothing left behind.
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

#include "rendezvous/auth.hpp"
#include "rendezvous/protocol.hpp"
#include "store/wire.hpp"
#include "support/fixtures.hpp"
#include "support/harness.hpp"
#include "support/nodes.hpp"
#include "support/raw_peer.hpp"
#include "support/temp_dir.hpp"

namespace test_hostile_peers {

using namespace npu_run::testing;
using namespace npu_run::rdzv;
using Catch::Matchers::Contains;

namespace {

const std::string kToken = "hostile-test-token";

// Under ASan or TSan the allocator holds freed memory back (ASan's quarantine alone is 256 MiB),
// so a process's resident size says nothing about what it keeps alive.
#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define NPU_RUN_SANITIZED 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define NPU_RUN_SANITIZED 1
#endif
#ifdef NPU_RUN_SANITIZED
constexpr bool kSanitized = true;
#else
constexpr bool kSanitized = false;
#endif
constexpr bool kResidentSizeMeansLiveMemory = !kSanitized;

Hello real_hello(const std::string& nonce = std::string(64, 'a')) {
  return Hello{kMagic, kProtocolVersion, "none", nonce};
}

// What an attack found wrong; checked on the test's thread (Catch2 is not thread-safe).
using Problems = std::vector<std::string>;
using Attack = std::function<void(int port, Problems& problems)>;
// An attack that also watches node 0's agent, which hosts the server.
using AttackOnNode0 = std::function<void(int port, pid_t node0, Problems& problems)>;

void expect(bool ok, const std::string& what, Problems& problems) {
  if (!ok) problems.push_back(what);
}

// Node 0 (hosting the server, token required unless `with_token` is false, 1 s handshake
// deadline) starts; `attack` runs against its port while node 1 starts and both nodes' workers
// run; the workers finish only once the attack is over, so every check the attack makes is
// against a live server. Returns node 0's log.
std::string job_survives(const AttackOnNode0& attack, bool with_token = true) {
  TempDir dir;
  const int port = unused_port();
  for (const char* rank : {"0", "1"}) make_gate(dir.file(std::string("gate.") + rank));
  const std::string script = "echo running; read x < \"$OUT/gate.$RANK\"; echo done-$RANK";
  EnvOverrides env = {{"OUT", dir.path()}};
  if (with_token) env["NPU_RUN_RDZV_TOKEN"] = kToken;
  // Nothing here should cost a node: under a sanitizer an attack that makes node 0 copy
  // hundreds of MiB (the glutton below) holds its loop longer than the fast heartbeat timeout
  // of start_node (seen under TSan: node 0 declared its own agent lost), so it gets more.
  std::vector<std::string> flags = {"--rdzv-conf", "read_timeout=1"};
  if (kSanitized) flags.insert(flags.end(), {"--heartbeat-timeout", "10"});
  std::vector<std::string> flags0 = flags;
  for (const char* f : {"--node-rank", "0"}) flags0.emplace_back(f);
  auto a = start_node(port, 2, 1, script, flags0, env);
  a->wait_for_output("rendezvous server on", 1, 30s, true);
  Problems problems;
  std::thread attacker([&] { attack(port, a->pid(), problems); });
  std::vector<std::string> flags1 = flags;
  for (const char* f : {"--node-rank", "1"}) flags1.emplace_back(f);
  auto b = start_node(port, 2, 1, script, flags1, env);
  a->wait_for_output("running", 1, 60s);
  b->wait_for_output("running", 1, 60s);
  attacker.join();
  if (!problems.empty()) {  // the nodes' logs say why
    a->send_signal(SIGTERM);
    b->send_signal(SIGTERM);
    const auto stopped = NpuRunProcess::wait_all({a.get(), b.get()}, 60s);
    INFO(stopped[0].err << "\n----\n" << stopped[1].err);
    for (const std::string& p : problems) FAIL_CHECK(p);
    return stopped[0].err;
  }
  open_gate(dir.file("gate.0"));
  open_gate(dir.file("gate.1"));
  const auto done = NpuRunProcess::wait_all({a.get(), b.get()}, 60s);
  INFO(done[0].err << "\n----\n" << done[1].err);
  CHECK(done[0].exit_code == 0);
  CHECK(done[1].exit_code == 0);
  CHECK_THAT(done[0].out, Contains("done-0"));
  CHECK_THAT(done[1].out, Contains("done-1"));
  require_no_strays(*a);
  require_no_strays(*b);
  return done[0].err;
}

std::string job_survives(const Attack& attack, bool with_token = true) {
  return job_survives([&](int port, pid_t, Problems& problems) { attack(port, problems); },
                      with_token);
}

// Resident memory of a process in KiB (VmRSS), 0 when it cannot be read.
long resident_kib(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stol(line.substr(6));
  }
  return 0;
}

// The server still answers a newcomer's hello: it kept serving through the attack.
void server_still_answers(int port, Problems& problems) {
  Raw probe(port);
  probe.send(real_hello());
  const auto m = probe.reply();
  expect(m && std::holds_alternative<Challenge>(*m), "the server no longer answers a hello",
         problems);
}

void server_still_answers_without_token(int port, Problems& problems) {
  Raw probe(port);
  probe.send(real_hello(""));
  const auto m = probe.reply();
  expect(m && std::holds_alternative<Welcome>(*m), "the server no longer welcomes a hello",
         problems);
}

}  // namespace

TEST_CASE("hostile peers: random bytes", "[integration][hostile]") {
  job_survives([](int port, Problems& problems) {
    std::mt19937 rng(7);
    std::vector<Raw> peers;
    for (int i = 0; i < 50; ++i) {
      std::string noise(2048, '\0');
      for (char& c : noise) c = static_cast<char>(rng());
      peers.emplace_back(port);
      peers.back().send(noise);
    }
    // Each is refused (bad JSON, a frame over the handshake limit) or cut at the deadline.
    for (Raw& p : peers)
      expect(p.closed_within(5s), "a peer sending noise stayed connected", problems);
    server_still_answers(port, problems);
  });
}

TEST_CASE("hostile peers: a length prefix of 16 MiB and one of 4 GiB", "[integration][hostile]") {
  job_survives([](int port, Problems& problems) {
    // A frame's first byte is 0 (npu_run's frames are below 16 MiB): far over the handshake
    // limit, refused by the rendezvous by name.
    Raw peer(port);
    peer.send(std::string("\x00\xff\xff\xff", 4) + "{\"type\":");
    const std::string code = peer.error_code();
    expect(code == "too_large", "a 16 MiB frame got '" + code + "', not too_large", problems);
    expect(peer.closed_within(2s), "the 16 MiB peer stayed connected", problems);
    // Not a frame at all: the workers' store on the same port takes it, as torch 1.x's
    // command 255, which does not exist, and closes it.
    Raw huge(port);
    huge.send(std::string("\xff\xff\xff\xff", 4) + "{\"type\":");
    expect(huge.closed_within(2s), "the 4 GiB peer stayed connected", problems);
    server_still_answers(port, problems);
  });
}

TEST_CASE("hostile peers: TCPStore framing on the shared port costs each peer its connection",
          "[integration][hostile]") {
  using namespace npu_run::store;
  job_survives([](int port, pid_t node0, Problems& problems) {
    const std::string validate =
        encode_request(Generation::kTorch2, {Command::kValidate, {}, {}, 0, kValidationMagic});
    const auto u64 = [](uint64_t v) { return std::string(reinterpret_cast<const char*>(&v), 8); };
    // A torch 1.x SET announcing a key of 1 TiB: refused when the length is read.
    Raw big_key(port);
    big_key.send(std::string(1, '\0') + u64(uint64_t{1} << 40));
    expect(big_key.closed_within(2s), "a 1 TiB key kept its connection", problems);
    // A validated 2.x client asking for 2^62 keys at once.
    Raw many_keys(port);
    many_keys.send(validate + std::string(1, '\x0a') + u64(uint64_t{1} << 62));
    expect(many_keys.closed_within(2s), "a multi_get of 2^62 keys kept its connection", problems);
    // npu_run's tier greeting, then an untagged wait, which no tier sends.
    Raw bad_tier(port);
    bad_tier.send(encode_request(Generation::kTier, {Command::kValidate, {}, {}, 0, kTierMagic}) +
                  encode_request(Generation::kTier, {Command::kWait, {"/k"}, {}}));
    expect(bad_tier.closed_within(2s), "an untagged wait from a tier kept its connection",
           problems);
    // A client that asks for 1 MiB 400 times and never reads: its answers queue up to the cap
    // (160 MiB), then it loses the connection; node 0 stays within bounds.
    Raw glutton(port);
    glutton.send(validate + encode_request(Generation::kTorch2,
                                           {Command::kSet, {"/big"}, {std::string(1 << 20, 'x')}}));
    const std::string get = encode_request(Generation::kTorch2, {Command::kGet, {"/big"}, {}});
    for (int i = 0; i < 400; ++i) glutton.send(get);
    std::this_thread::sleep_for(1s);
    const long rss = resident_kib(node0);
    // Under a sanitizer resident memory is shadow and quarantine, not what the store holds.
    expect(!kResidentSizeMeansLiveMemory || rss < 400L * 1024,
           "node 0 grew to " + std::to_string(rss / 1024) + " MiB", problems);
    expect(glutton.closed_within(10s), "a client that never reads kept its connection", problems);
    // Through all of it, the store answers a well-behaved client.
    Raw client(port);
    client.send(validate + encode_request(Generation::kTorch2, {Command::kSet, {"/ok"}, {"yes"}}) +
                encode_request(Generation::kTorch2, {Command::kGet, {"/ok"}, {}}));
    const auto answer = client.read_bytes(8 + 3);
    expect(answer && answer->substr(8) == "yes", "a well-behaved store client got no answer",
           problems);
    server_still_answers(port, problems);
  });
}

TEST_CASE("hostile peers: a frame cut in half then silence", "[integration][hostile]") {
  job_survives([](int port, Problems& problems) {
    const std::string frame = encode_frame(encode(ClientMessage{real_hello()}));
    Raw half(port);
    half.send(frame.substr(0, frame.size() / 2));
    // Trickling one byte at a time does not extend the deadline: it is for the whole handshake.
    Raw trickle(port);
    for (size_t i = 0; i < 8; ++i) {
      trickle.send(frame.substr(i, 1));
      std::this_thread::sleep_for(200ms);  // the attacker's own pace
    }
    expect(half.closed_within(3s), "a half-sent frame kept its connection past the deadline",
           problems);
    expect(trickle.closed_within(3s), "a trickling peer kept its connection past the deadline",
           problems);
    server_still_answers(port, problems);
  });
}

TEST_CASE("hostile peers: thousands of idle connections", "[integration][hostile]") {
  rlimit limit{};
  REQUIRE(::getrlimit(RLIMIT_NOFILE, &limit) == 0);
  limit.rlim_cur = limit.rlim_max;
  REQUIRE(::setrlimit(RLIMIT_NOFILE, &limit) == 0);
  job_survives([](int port, Problems& problems) {
    std::vector<Raw> idle;
    for (int i = 0; i < 3000; ++i) idle.emplace_back(port);
    size_t open = 0;
    for (const Raw& r : idle) open += r.connected() ? 1 : 0;
    expect(open == idle.size(), "could not open 3000 connections", problems);
    server_still_answers(port, problems);
    // Over the cap (1024 for a 2-node job) the oldest went at once; the deadline takes the rest.
    size_t closed = 0;
    for (Raw& r : idle) closed += r.closed_within(3s) ? 1 : 0;
    expect(closed == idle.size(),
           std::to_string(idle.size() - closed) + " idle connections outlived the deadline",
           problems);
  });
}

TEST_CASE("hostile peers: welcomed connections that never join, in a job without a token",
          "[integration][hostile]") {
  rlimit limit{};
  REQUIRE(::getrlimit(RLIMIT_NOFILE, &limit) == 0);
  limit.rlim_cur = limit.rlim_max;
  REQUIRE(::setrlimit(RLIMIT_NOFILE, &limit) == 0);
  const std::string log = job_survives(
      [](int port, Problems& problems) {
        // Without a token the server welcomes any hello; these then only send heartbeats.
        std::vector<Raw> idle;
        size_t welcomed = 0;
        for (int i = 0; i < 1500; ++i) {
          Raw& r = idle.emplace_back(port);
          r.send(ClientMessage{real_hello("")});
          r.send(ClientMessage{Heartbeat{}});
        }
        for (Raw& r : idle) {
          const auto m = r.reply(2s);
          welcomed += m && std::holds_alternative<Welcome>(*m) ? 1 : 0;
        }
        // The first ones may be gone already: over the cap (1024) the oldest are closed.
        expect(welcomed > 400, "only " + std::to_string(welcomed) + " of 1500 were welcomed",
               problems);
        size_t closed = 0;
        for (Raw& r : idle) closed += r.closed_within(3s) ? 1 : 0;
        expect(closed == idle.size(),
               std::to_string(idle.size() - closed) +
                   " welcomed connections that never joined outlived the handshake deadline",
               problems);
        server_still_answers_without_token(port, problems);
      },
      false);
  // 1500 strangers, a handful of lines (the first, then one summary per 5 s).
  size_t lines = 0;
  for (size_t at = log.find("rendezvous server:"); at != std::string::npos;
       at = log.find("rendezvous server:", at + 1))
    ++lines;
  INFO(log);
  CHECK(lines < 12);
  CHECK_THAT(log, Contains("more connection(s) refused or dropped"));
}

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

}  // namespace test_hostile_peers
