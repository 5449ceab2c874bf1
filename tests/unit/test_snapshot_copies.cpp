// The ring of copies (issue 47): the ledger of other nodes' copies an agent keeps
// (agent/snapshots/copy_ledger.hpp), and its copy port with real sockets on loopback
// (agent/snapshots/snapshot_copy_server.hpp, agent/snapshots/snapshot_copy_client.hpp): a copy put
// and fetched back byte for byte, a keeper's refusal, and peers without the job's key or that break
// the protocol losing their connection and getting nothing.
#include <unistd.h>

#include <array>
#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/read.hpp>
#include <boost/asio/write.hpp>
#include <catch2/catch.hpp>
#include <chrono>
#include <fstream>
#include <functional>
#include <map>
#include <optional>
#include <random>

#include "agent/snapshots/copy_ledger.hpp"
#include "agent/snapshots/copy_stream.hpp"
#include "agent/snapshots/snapshot_copy_client.hpp"
#include "agent/snapshots/snapshot_copy_server.hpp"
#include "support/temp_dir.hpp"

namespace test_snapshot_copies {

using namespace npu_run;
using Catch::Matchers::Contains;
using npu_run::testing::read_file;
using npu_run::testing::TempDir;
using namespace std::chrono_literals;

TEST_CASE("copy ledger: the newest two complete copies of each rank, of one world",
          "[unit][snapshots]") {
  CopyLedger ledger;
  const auto arrive = [&](int rank, int64_t step, int world = 4) {
    CopyLedger::Begun begun = ledger.begin(rank, step, 100, world);
    std::vector<std::string> dropped = ledger.complete(begun.name);
    dropped.insert(dropped.end(), begun.dropped.begin(), begun.dropped.end());
    return dropped;
  };
  CHECK(arrive(2, 5).empty());
  CHECK(arrive(3, 5).empty());
  CHECK(arrive(2, 10).empty());
  CHECK(arrive(3, 10).empty());
  CHECK(ledger.used() == 400);
  REQUIRE(ledger.ranges(16).size() == 1);
  CHECK(ledger.ranges(16)[0].first_rank == 2);
  CHECK(ledger.ranges(16)[0].last_rank == 3);
  CHECK(ledger.ranges(16)[0].memory == std::vector<int64_t>{5, 10});
  // A third step drops the rank's oldest; ranks that differ are two ranges.
  CHECK(arrive(2, 15).size() == 1);
  CHECK(ledger.find(2, 5) == nullptr);
  CHECK(ledger.ranges(16).size() == 2);
  CHECK(ledger.ranges(1).size() == 1);  // bounded as the wire is
  // One still arriving is not held; abandoned, its file goes.
  const CopyLedger::Begun partial = ledger.begin(3, 15, 100, 4);
  CHECK(ledger.find(3, 15) == nullptr);
  CHECK(ledger.abandon(partial.name) == partial.name);
  // A restore to 10 drops what is later; room for the node's own drops the oldest step.
  CHECK(ledger.drop_after(10).size() == 1);
  CHECK(ledger.drop_oldest().size() == 1);  // rank 3's step 5
  CHECK(ledger.find(2, 10) != nullptr);
  // A copy from a world of another size: the ranks are others', every copy goes.
  CHECK(arrive(0, 20, 6).size() == 2);
  CHECK(ledger.world_size() == 6);
  CHECK(ledger.copies().size() == 1);
}

namespace {

// A keeper of files in a directory, as the desk keeps segments; it can refuse.
class DirectoryKeeper final : public CopyKeeper {
 public:
  explicit DirectoryKeeper(std::string dir) : dir_(std::move(dir)) {}
  Slot copy_begins(int rank, int64_t step, uint64_t bytes, int /*world*/) override {
    ++begun;
    if (bytes > room) return {"", "no room here"};
    return {file(rank, step), ""};
  }
  void copy_ends(const std::string& f, bool whole) override { ended[f] = whole; }
  Source copy_wanted(int rank, int64_t step) override {
    const std::string f = file(rank, step);
    if (access(f.c_str(), R_OK) != 0) return {"", 0, "not here"};
    return {f, read_file(f).size(), ""};
  }
  void copy_served(const std::string& /*f*/) override { ++served; }
  std::string file(int rank, int64_t step) const {
    return dir_ + "/r" + std::to_string(rank) + "s" + std::to_string(step);
  }
  uint64_t room = UINT64_MAX;
  int begun = 0;
  int served = 0;
  std::map<std::string, bool> ended;

 private:
  std::string dir_;
};

std::string random_bytes(size_t n) {
  std::mt19937 gen(7);
  std::string out(n, '\0');
  for (char& c : out) c = static_cast<char>(gen());
  return out;
}

// Runs the loop until `done` or 20 s.
void run_until(boost::asio::io_context& io, const std::function<bool()>& done) {
  const auto until = std::chrono::steady_clock::now() + 20s;
  while (!done() && std::chrono::steady_clock::now() < until) io.run_for(10ms);
  REQUIRE(done());
}

struct CopyPort {
  boost::asio::io_context io;
  TempDir dir;
  DirectoryKeeper keeper{dir.path()};
  SnapshotCopyServer server{io, keeper, copy_key("token"), "job"};
  rdzv::CopyPeer peer() const { return {"here", "127.0.0.1", server.port()}; }
};

}  // namespace

TEST_CASE("copy port: a snapshot put on the next agent and fetched back, byte for byte",
          "[unit][snapshots]") {
  CopyPort port;
  const std::string data = random_bytes(3'500'000);  // several chunks
  const std::string segment = port.dir.write("segment", data);
  std::vector<std::string> results;
  SnapshotCopyClient client(
      port.io, copy_key("token"), "job",
      [&](const SnapshotCopyClient::Copy&, const std::string& error) { results.push_back(error); });
  client.send_to(port.peer());
  client.copy({5, 40, 8, segment, data.size()});
  run_until(port.io, [&] { return !results.empty(); });
  CHECK(results[0].empty());
  CHECK(read_file(port.keeper.file(5, 40)) == data);
  CHECK(port.keeper.ended[port.keeper.file(5, 40)]);
  // Refused: said, and the connection serves the next copy.
  port.keeper.room = 10;
  client.copy({6, 40, 8, segment, data.size()});
  run_until(port.io, [&] { return results.size() == 2; });
  CHECK(results[1] == "no room here");
  port.keeper.room = UINT64_MAX;
  client.copy({6, 40, 8, segment, data.size()});
  run_until(port.io, [&] { return results.size() == 3; });
  CHECK(results[2].empty());

  std::optional<std::string> fetched;
  client.fetch(port.peer(), 5, 40, UINT64_MAX, port.dir.file("fetched"),
               [&](const std::string& error, uint64_t bytes) {
                 fetched = error;
                 CHECK(bytes == data.size());
               });
  run_until(port.io, [&] { return fetched.has_value(); });
  CHECK(fetched->empty());
  CHECK(read_file(port.dir.file("fetched")) == data);
  CHECK(port.keeper.served == 1);
  // Not held there, or larger than the room the fetcher has: said, nothing kept.
  fetched.reset();
  client.fetch(port.peer(), 7, 40, UINT64_MAX, port.dir.file("none"),
               [&](const std::string& error, uint64_t) { fetched = error; });
  run_until(port.io, [&] { return fetched.has_value(); });
  CHECK_THAT(*fetched, Contains("not here"));
  fetched.reset();
  client.fetch(port.peer(), 5, 40, 1000, port.dir.file("small"),
               [&](const std::string& error, uint64_t) { fetched = error; });
  run_until(port.io, [&] { return fetched.has_value(); });
  CHECK_THAT(*fetched, Contains("larger than the 1000 bytes"));
}

TEST_CASE("copy port: without the job's key a peer gives and gets nothing", "[unit][snapshots]") {
  CopyPort port;
  const std::string segment = port.dir.write("segment", "secret weights");
  port.dir.write("r1s10", "secret weights");
  std::vector<std::string> results;
  SnapshotCopyClient stranger(
      port.io, copy_key("another token"), "job",
      [&](const SnapshotCopyClient::Copy&, const std::string& error) { results.push_back(error); });
  stranger.send_to(port.peer());
  stranger.copy({1, 10, 2, segment, 14});
  run_until(port.io, [&] { return !results.empty(); });
  CHECK_THAT(results[0], Contains("does not know this job's key"));
  std::optional<std::string> fetched;
  stranger.fetch(port.peer(), 1, 10, UINT64_MAX, port.dir.file("stolen"),
                 [&](const std::string& error, uint64_t) { fetched = error; });
  run_until(port.io, [&] { return fetched.has_value(); });
  CHECK_THAT(*fetched, Contains("does not know this job's key"));
  CHECK(port.keeper.begun == 0);
  CHECK(port.keeper.served == 0);
  CHECK(access(port.dir.file("stolen").c_str(), F_OK) != 0);
}

TEST_CASE("copy port: a peer that breaks the protocol loses its connection, no one else's",
          "[unit][snapshots][hostile]") {
  CopyPort port;
  using tcp = boost::asio::ip::tcp;
  const auto closed_after = [&](const std::string& sent) {
    tcp::socket raw(port.io);
    raw.connect(tcp::endpoint(boost::asio::ip::make_address("127.0.0.1"),
                              static_cast<unsigned short>(port.server.port())));
    boost::asio::write(raw, boost::asio::buffer(sent));
    bool closed = false;
    std::array<char, 4096> sink{};
    std::function<void()> drain = [&] {
      raw.async_read_some(boost::asio::buffer(sink), [&](boost::system::error_code ec, size_t) {
        if (ec)
          closed = true;
        else
          drain();
      });
    };
    drain();
    run_until(port.io, [&] { return closed; });
    return closed;
  };
  CHECK(closed_after(std::string(10'000, 'x')));  // a line past 4 KiB
  CHECK(closed_after("not json\n"));
  CHECK(closed_after(R"({"op":"hello","run_id":"another job","nonce":"00"})"
                     "\n"));
  CHECK(port.keeper.begun == 0);
  // The port still serves the job's agents.
  const std::string segment = port.dir.write("segment", "weights");
  std::vector<std::string> results;
  SnapshotCopyClient client(
      port.io, copy_key("token"), "job",
      [&](const SnapshotCopyClient::Copy&, const std::string& error) { results.push_back(error); });
  client.send_to(port.peer());
  client.copy({0, 1, 2, segment, 7});
  run_until(port.io, [&] { return !results.empty(); });
  CHECK(results[0].empty());
}

TEST_CASE("copy port: an agent's answers of the wrong types are refusals, never a crash",
          "[unit][snapshots][hostile]") {
  // A peer that knows the key (a job's agent gone wrong) and answers {"ok": "yes"}.
  using tcp = boost::asio::ip::tcp;
  boost::asio::io_context io;
  TempDir dir;
  tcp::acceptor acceptor(io, tcp::endpoint(boost::asio::ip::make_address("127.0.0.1"), 0));
  std::shared_ptr<CopyStream> peer;
  acceptor.async_accept([&](boost::system::error_code ec, tcp::socket socket) {
    REQUIRE(!ec);
    peer = std::make_shared<CopyStream>(std::move(socket), kCopyStall);
    peer->demand_proof(copy_key("token"), "job", [&](const std::string& error) {
      REQUIRE(error.empty());
      peer->receive([&](const std::string&, const nlohmann::json& put) {
        CHECK(copy_text(put, "op") == "put");
        peer->send({{"ok", "yes"}, {"error", 7}}, [](const std::string&) {});
      });
    });
  });
  const std::string segment = dir.write("segment", "weights");
  std::vector<std::string> results;
  SnapshotCopyClient client(
      io, copy_key("token"), "job",
      [&](const SnapshotCopyClient::Copy&, const std::string& error) { results.push_back(error); });
  client.send_to({"peer", "127.0.0.1", acceptor.local_endpoint().port()});
  client.copy({0, 1, 2, segment, 7});
  run_until(io, [&] { return !results.empty(); });
  CHECK(results[0] == "refused");
  CHECK(!copy_ok(nlohmann::json{{"ok", 1}}));
  CHECK(copy_ok(nlohmann::json{{"ok", true}}));
}

}  // namespace test_snapshot_copies
