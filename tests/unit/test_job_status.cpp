// `npu_run status` (issue 18): the ranks' beats carried by heartbeats, the status the state
// machine answers with, its wire form and its text, and the agent's answer socket.
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <atomic>
#include <boost/asio/io_context.hpp>
#include <catch2/catch.hpp>
#include <cstring>
#include <nlohmann/json.hpp>
#include <thread>

#include "agent/round/status_text.hpp"
#include "net/answer_socket.hpp"
#include "rendezvous/client/status_query.hpp"
#include "rendezvous/protocol/protocol.hpp"
#include "rendezvous/state/state.hpp"
#include "support/run_until.hpp"
#include "support/temp_dir.hpp"

namespace test_job_status {

using namespace npu_run;
using namespace npu_run::rdzv;
using Catch::Matchers::Contains;

namespace {

JobStatus status_of(const std::string& run_id) {
  JobStatus s;
  s.run_id = run_id;
  s.phase = "running";
  return s;
}

const Now t0{Clock::time_point{} + std::chrono::hours(1), 1'700'000'000'000};

NodeInfo node(const std::string& host, int nproc = 2) {
  NodeInfo n;
  n.host = host;
  n.addr = "10.0.0." + std::to_string(host.size());
  n.nproc = nproc;
  for (int i = 0; i < nproc; ++i) n.devices.push_back(i);
  n.worker_port = 40000;
  return n;
}

struct Job {
  RendezvousState state;
  explicit Job(int nodes) : state(settings(nodes), t0) {}
  static JobSettings settings(int nodes) {
    JobSettings s;
    s.run_id = "job";
    s.min_nodes = s.max_nodes = nodes;
    s.max_restarts = 3;
    return s;
  }
  std::vector<Outgoing> send(ClientId id, const ClientMessage& m, Now now = t0) {
    return state.on_message(id, m, now);
  }
  void join(ClientId id, const NodeInfo& n, std::optional<int> rank = std::nullopt) {
    send(id, Hello{kMagic, kProtocolVersion, "job", ""});
    Join j;
    j.node = n;
    j.node_rank = rank;
    j.min_nodes = j.max_nodes = state.settings().max_nodes;
    j.max_restarts = state.settings().max_restarts;
    send(id, j);
  }
  // The answer to a status query from `id`, and whether its connection closes after it.
  std::pair<JobStatus, bool> ask(ClientId id, Now now = t0) {
    const auto out = send(id, StatusQuery{42}, now);
    REQUIRE(out.size() == 1);
    const auto* status = std::get_if<JobStatus>(&out[0].message);
    REQUIRE(status != nullptr);
    CHECK(status->query_id == 42);
    return {*status, out[0].close_after};
  }
};

template <typename T>
T round_trip(const ServerMessage& m) {
  auto decoded = decode_server_message(encode(m));
  REQUIRE(std::holds_alternative<ServerMessage>(decoded));
  return std::get<T>(std::get<ServerMessage>(decoded));
}

}  // namespace

TEST_CASE("job status: while joining, who waits and which node ranks are missing",
          "[unit][status]") {
  Job job(3);
  job.join(1, node("host-a"), 0);
  job.join(2, node("host-bb"), 2);
  job.send(9, Hello{kMagic, kProtocolVersion, "job", ""});  // npu_run status: welcomed only
  const auto [s, closes] = job.ask(9, t0 + std::chrono::seconds(3));
  CHECK(closes);  // a status connection ends with its answer
  CHECK(s.run_id == "job");
  CHECK(s.phase == "joining");
  CHECK(s.max_restarts == 3);
  REQUIRE(s.nodes.size() == 2);
  CHECK(s.nodes[0].host == "host-a");
  CHECK(s.nodes[0].state == "waiting");
  CHECK(s.nodes[0].node_rank == 0);
  CHECK(s.nodes[0].silent_ms == 3000);
  CHECK(s.nodes[1].node_rank == 2);
  CHECK(s.missing_nodes == 1);
  CHECK(s.missing_node_ranks == std::vector<int>{1});
  const std::string text = format_job_status(s);
  CHECK_THAT(text, Contains("job 'job': joining, round 0, restart 0 of 3, 0 nodes of 3"));
  CHECK_THAT(text, Contains("  node 0  host-a  10.0.0.6  2 workers, waiting for the next round"));
  CHECK_THAT(text, Contains("missing: 1 more node (node ranks 1)"));
  // Before its welcome nobody is told anything.
  const auto refused = job.send(10, StatusQuery{1});
  REQUIRE(refused.size() == 1);
  CHECK(std::holds_alternative<ErrorReply>(refused[0].message));
}

TEST_CASE("job status: each rank's last beat as its agent's heartbeats carried it, aged",
          "[unit][status]") {
  Job job(2);
  job.join(1, node("host-a"));
  job.join(2, node("host-b"));
  REQUIRE(job.state.phase() == RendezvousState::Phase::kRunning);
  // Node b's heartbeat: rank 0 beat 1.5 s before it was sent, rank 1 never; a forged rank 7
  // (node b has two) and a repeated rank are dropped.
  Heartbeat beat{0};
  beat.ranks = std::vector<RankBeat>{
      {0, 12, "step 11", 1500}, {1, 0, "", -1}, {7, 1, "forged", 0}, {0, 99, "again", 0}};
  job.send(2, beat, t0 + std::chrono::seconds(10));
  job.send(1, Heartbeat{0}, t0 + std::chrono::seconds(11));  // no ranks: nothing changes
  const auto [s, closes] = job.ask(1, t0 + std::chrono::seconds(12));
  CHECK_FALSE(closes);  // an agent asking keeps its connection
  CHECK(s.phase == "running");
  REQUIRE(s.nodes.size() == 2);
  const NodeStatus& b = s.nodes[1];
  CHECK(b.host == "host-b");
  CHECK(b.rank_offset == 2);
  CHECK(b.state == "running");
  CHECK(b.silent_ms == 2000);
  REQUIRE(b.ranks.size() == 2);
  CHECK(b.ranks[0].beats == 12);
  CHECK(b.ranks[0].age_ms == 3500);  // 1.5 s when sent + 2 s since
  CHECK(b.ranks[1].age_ms == -1);
  CHECK(s.nodes[0].ranks.empty());
  const std::string text = format_job_status(s);
  CHECK_THAT(text, Contains("job 'job': running, round 0, restart 0 of 3, 2 nodes of 2"));
  CHECK_THAT(text, Contains("  node 1  host-b  10.0.0.6  ranks 2-3  running\n"));
  CHECK_THAT(text, Contains("    rank 2  local 0  12 beats, last 'step 11' 3.5 s ago\n"));
  CHECK_THAT(text, Contains("    rank 3  local 1  no beat yet\n"));
  CHECK_THAT(text, Contains("  node 0  host-a  10.0.0.6  ranks 0-1  running\n    (no beats"));
  // A node not heard from for a while is flagged; a lost one is said to be lost.
  const auto later = job.ask(1, t0 + std::chrono::seconds(40)).first;
  CHECK_THAT(format_job_status(later), Contains("(not heard from for 30.0 s)"));
  job.state.on_disconnect(2, t0 + std::chrono::seconds(41));
  const auto lost = job.ask(1, t0 + std::chrono::seconds(42)).first;
  CHECK(lost.nodes[1].state == "lost");
  REQUIRE(lost.root_cause);
  CHECK_THAT(format_job_status(lost), Contains("root cause: node 1 (host-b): agent lost"));
}

TEST_CASE("job status: the wire form and the JSON", "[unit][status][protocol]") {
  JobStatus s;
  s.query_id = 7;
  s.run_id = "r1";
  s.phase = "running";
  s.round = 2;
  s.restart_count = 1;
  s.max_restarts = 3;
  s.min_nodes = 1;
  s.max_nodes = 4;
  NodeStatus n;
  n.node_rank = 0;
  n.host = "h";
  n.addr = "10.0.0.1";
  n.nproc = 8;
  n.state = "running";
  n.silent_ms = 12;
  n.ranks = {{3, 5, "step 4", 900}};
  s.nodes = {n};
  s.missing_node_ranks = {2};
  s.missing_nodes = 1;
  FailureReport f;
  f.description = "exit code 3";
  s.root_cause = f;
  const JobStatus back = round_trip<JobStatus>(s);
  CHECK(back.query_id == 7);
  CHECK(back.run_id == "r1");
  CHECK(back.round == 2);
  REQUIRE(back.nodes.size() == 1);
  CHECK(back.nodes[0].ranks[0].text == "step 4");
  CHECK(back.nodes[0].ranks[0].age_ms == 900);
  CHECK(back.missing_node_ranks == std::vector<int>{2});
  CHECK(back.root_cause->description == "exit code 3");
  CHECK_THAT(format_job_status(back), Contains("(1..4 wanted)"));
  const auto j = nlohmann::json::parse(job_status_json(s));
  CHECK(j["nodes"][0]["ranks"][0]["beats"] == 5);
  CHECK_FALSE(j.contains("type"));
  // A heartbeat's ranks and a query travel too; a rank's text is bounded.
  Heartbeat h{3};
  h.ranks = std::vector<RankBeat>{{1, 2, "x", 5}};
  auto decoded = decode_client_message(encode(ClientMessage{h}));
  REQUIRE(std::holds_alternative<ClientMessage>(decoded));
  CHECK(std::get<Heartbeat>(std::get<ClientMessage>(decoded)).ranks->at(0).text == "x");
  h.ranks->at(0).text = std::string(Limits::kMaxBeatText + 1, 'x');
  CHECK(std::holds_alternative<ProtocolError>(decode_client_message(encode(ClientMessage{h}))));
  auto query = decode_client_message(encode(ClientMessage{StatusQuery{9}}));
  CHECK(std::get<StatusQuery>(std::get<ClientMessage>(query)).id == 9);
  CHECK_FALSE(sequenced(ClientMessage{StatusQuery{}}));
  CHECK_FALSE(sequenced(ServerMessage{JobStatus{}}));
}

TEST_CASE(
    "answer socket: each connection gets one answer, late ones the timeout's, and no more "
    "than the cap wait",
    "[unit][status]") {
  testing::TempDir dir;
  boost::asio::io_context io;
  std::vector<net::AnswerSocket::Reply> held;
  bool hold = false;
  net::AnswerSocket socket(
      io, dir.file("status"),
      [&](const net::AnswerSocket::Reply& reply) {
        if (hold) {
          held.push_back(reply);
          return;
        }
        reply(encode_frame(encode(ServerMessage{status_of("now")})));
      },
      std::chrono::milliseconds(1000),
      encode_frame(encode(ServerMessage{ErrorReply{"no_answer", "late"}})));
  // The listener is close-on-exec.
  bool cloexec = false;
  for (int fd = 3; fd < 256; ++fd) {
    sockaddr_un address{};
    socklen_t size = sizeof address;
    if (::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &size) == 0 &&
        address.sun_family == AF_UNIX && dir.file("status") == address.sun_path)
      cloexec = (::fcntl(fd, F_GETFD) & FD_CLOEXEC) != 0;
  }
  CHECK(cloexec);
  auto ask = [&](std::chrono::milliseconds timeout) {
    StatusResult result;
    std::atomic<bool> finished{false};
    std::thread asker([&] {
      result = query_agent_status(dir.file("status"), timeout);
      finished = true;
    });
    npu_run::testing::run_until(
        io, [&] { return finished.load(); }, timeout + std::chrono::seconds(1));
    asker.join();
    return result;
  };
  auto now = ask(std::chrono::seconds(2));
  REQUIRE(std::holds_alternative<JobStatus>(now));
  CHECK(std::get<JobStatus>(now).run_id == "now");
  hold = true;
  auto late = ask(std::chrono::seconds(2));
  REQUIRE(std::holds_alternative<std::string>(late));
  CHECK_THAT(std::get<std::string>(late), Contains("late"));
  // A reply after the timeout's answer changes nothing.
  held.front()(encode_frame(encode(ServerMessage{status_of("too late")})));
  CHECK(query_agent_status(dir.file("missing"), std::chrono::seconds(1)).index() == 1);

  // Past the cap, a connection is closed unanswered at once; those waiting get the timeout's.
  std::vector<int> fds;
  for (size_t i = 0; i <= net::AnswerSocket::kMaxWaiting; ++i) {
    const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    const std::string path = dir.file("status");
    REQUIRE(path.size() < sizeof address.sun_path);
    std::memcpy(address.sun_path, path.c_str(), path.size() + 1);
    REQUIRE(::connect(fd, reinterpret_cast<const sockaddr*>(&address), sizeof address) == 0);
    fds.push_back(fd);
  }
  // Accepted in the order they came: the last one, past the cap, is closed at once (EOF).
  char byte = 0;
  CHECK(npu_run::testing::run_until(
      io, [&] { return ::recv(fds.back(), &byte, 1, MSG_DONTWAIT | MSG_PEEK) == 0; },
      std::chrono::seconds(5)));
  CHECK(::recv(fds.front(), &byte, 1, MSG_DONTWAIT) == -1);  // still waiting (timeout 1 s)
  auto answered = [&] {
    for (size_t i = 0; i < net::AnswerSocket::kMaxWaiting; ++i) {
      if (::recv(fds[i], &byte, 1, MSG_DONTWAIT | MSG_PEEK) != 1) return false;
    }
    return true;
  };
  CHECK(npu_run::testing::run_until(io, answered, std::chrono::seconds(5)));  // the timeout's
  for (int fd : fds) ::close(fd);
}

}  // namespace test_job_status
