// The rendezvous server under hostile connections while a real two-node job forms on it: each
// case attacks node 0's server from a thread, checks how the server treats the attacker, and
// requires that the job still completes on both nodes with nothing left behind
// (tests/support/hostile_job.hpp). Here: bytes and frames that are not the protocol, and
// connections by the thousand.
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

namespace test_hostile_peers {

using namespace npu_run::testing;
using namespace npu_run::testing::hostile;
using namespace npu_run::rdzv;
using Catch::Matchers::Contains;

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

}  // namespace test_hostile_peers
