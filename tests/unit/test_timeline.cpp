// The job's timeline: its bounds (node 0's, and what one agent sends), the blame sentence of a
// slow round for each cause, and the rendezvous recording arrivals, reports and decisions.
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <boost/asio/io_context.hpp>
#include <catch2/catch.hpp>
#include <cstdio>

#include "agent/records/agent_timeline.hpp"
#include "rendezvous/protocol/protocol.hpp"
#include "rendezvous/state/round_blame.hpp"
#include "rendezvous/state/state.hpp"
#include "support/outgoing.hpp"
#include "workers/progress_beats.hpp"

namespace test_timeline {

using namespace npu_run::rdzv;
using Catch::Matchers::Contains;
using Catch::Matchers::Equals;
using npu_run::AgentTimeline;
using namespace std::chrono_literals;

namespace {

const Now t0{Clock::time_point{}, 1'700'000'000'000};
constexpr int64_t kT0 = 1'700'000'000'000;

NodeArrival arrival(int node, const std::string& host, int64_t started, int64_t joined) {
  NodeArrival a;
  a.node = node;
  a.host = host;
  a.agent_start_ms = started;
  a.dialled_ms = started + 10;
  a.joined_ms = joined;
  return a;
}

}  // namespace

TEST_CASE("timeline: node 0 keeps at most kMaxEvents and counts the rest", "[timeline]") {
  JobTimeline timeline;
  TimelineEvent e;
  e.detail = std::string(1000, 'x');
  for (size_t i = 0; i < JobTimeline::kMaxEvents + 25; ++i) timeline.add(e);
  CHECK(timeline.events().size() == JobTimeline::kMaxEvents);
  CHECK(timeline.dropped() == 25);
  CHECK(timeline.events().front().detail.size() == kMaxDetail);
}

TEST_CASE("timeline: when full, the oldest beat samples make room for newer events", "[timeline]") {
  JobTimeline timeline;
  TimelineEvent sample{0, "a", 0, 0, TimelinePhase::kBeat, 1, 5, ""};
  TimelineEvent last{0, "a", 0, 0, TimelinePhase::kLastBeat, 2, 9, ""};
  for (size_t i = 0; i < JobTimeline::kMaxEvents / 2; ++i) {
    sample.time_ms = static_cast<int64_t>(i) + 1;
    timeline.add(sample);
    timeline.add(last);
  }
  // A whole second round: every one of its events is kept, the first round's samples go.
  for (size_t i = 0; i < JobTimeline::kMaxEvents / 2; ++i) {
    sample.round = last.round = 1;
    timeline.add(sample);
    timeline.add(last);
  }
  const std::vector<TimelineEvent> kept = timeline.events();
  CHECK(kept.size() == JobTimeline::kMaxEvents);
  CHECK(timeline.thinned() == JobTimeline::kMaxEvents);
  CHECK(timeline.dropped() == 0);
  size_t round0_last = 0;
  size_t round0_samples = 0;
  for (const TimelineEvent& e : kept) {
    round0_last += e.round == 0 && e.phase == TimelinePhase::kLastBeat ? 1 : 0;
    round0_samples += e.round == 0 && e.phase == TimelinePhase::kBeat ? 1 : 0;
  }
  CHECK(round0_last == JobTimeline::kMaxEvents / 2);  // every last beat of the first round
  CHECK(round0_samples == 0);  // then the second round's own oldest samples went too
  // Only first and last beats left: nothing more makes room.
  timeline.add(last);
  CHECK(timeline.dropped() == 1);
  CHECK(timeline.size() == JobTimeline::kMaxEvents);
}

TEST_CASE("timeline: an event's JSON reads back, and an unknown phase is refused", "[timeline]") {
  TimelineEvent e{3, "host-d", 25, 2, TimelinePhase::kBeat, kT0 + 5, 1200, "step 1200"};
  const TimelineEvent back = timeline_event_from(to_json(e));
  CHECK(back.node == 3);
  CHECK(back.host == "host-d");
  CHECK(back.rank == 25);
  CHECK(back.round == 2);
  CHECK(back.phase == TimelinePhase::kBeat);
  CHECK(back.time_ms == kT0 + 5);
  CHECK(back.step == 1200);
  nlohmann::json bad = to_json(e);
  bad["phase"] = "teleported";
  CHECK_THROWS_WITH(timeline_event_from(bad), Contains("unknown phase 'teleported'"));
}

TEST_CASE("timeline: one agent's events of a round never exceed what a report carries",
          "[timeline]") {
  for (int ranks : {1, 8, 64, 512}) {
    AgentTimeline timeline(ranks);
    timeline.new_round(ranks * 3);
    for (int i = 0; i < 200; ++i) timeline.note(TimelinePhase::kSpawned);  // the node's: capped
    const auto events = timeline.take(nullptr);
    CHECK(events.size() <= Limits::kMaxReportEvents);
    CHECK(events.size() == 64);
    // Room for every rank's first and last beat and its samples together.
    CHECK(AgentTimeline::samples_per_rank(ranks) * static_cast<size_t>(ranks) +
              2 * static_cast<size_t>(ranks) + 64 <=
          Limits::kMaxReportEvents + 2 * static_cast<size_t>(ranks));
  }
  CHECK(AgentTimeline::samples_per_rank(8) == 32);
  CHECK(AgentTimeline::samples_per_rank(512) == 0);
}

TEST_CASE("blame: the last node's late agent is named, with how late", "[timeline]") {
  const std::vector<NodeArrival> nodes{arrival(0, "host-a", kT0, kT0 + 300),
                                       arrival(1, "host-b", kT0 + 100, kT0 + 400),
                                       arrival(17, "host-r", kT0 + 39'800, kT0 + 40'400)};
  const RoundBlame b = blame_round(0, kT0, kT0 + 41'200, nodes, kT0);
  CHECK_THAT(b.sentence,
             Equals("round 0 formed in 41.2 s: the last node to join was node 17 (host-r), 40.1 s "
                    "after the first; its agent started 39.8 s late"));
  CHECK(b.cause == BlameCause::kLateStart);
  CHECK(b.last_node == 17);
  CHECK(to_json(b)["cause"] == "late_start");
}

TEST_CASE("blame: a health gate that held the last node is named with its slowest call",
          "[timeline]") {
  std::vector<NodeArrival> nodes{arrival(0, "host-a", kT0, kT0 + 300),
                                 arrival(1, "host-b", kT0, kT0 + 350)};
  nodes[1].verdict_ms = kT0 + 31'400;
  nodes[1].gate_ms = 31'000;
  nodes[1].gate_slowest = "hccn_tool -i 3 -optical -g";
  const RoundBlame b = blame_round(0, kT0, kT0 + 31'500, nodes, kT0);
  CHECK_THAT(b.sentence,
             Contains("the last node to join was node 1 (host-b), 31.1 s after the "
                      "first; its health gate took 31.0 s: hccn_tool -i 3 -optical -g"));
  CHECK(b.cause == BlameCause::kHealthGate);
}

TEST_CASE("blame: a join that redialled against the cap waited for a handshake slot",
          "[timeline]") {
  std::vector<NodeArrival> nodes{arrival(0, "host-a", kT0, kT0 + 300),
                                 arrival(1, "host-b", kT0, kT0 + 12'300)};
  nodes[1].dials = 7;
  const RoundBlame b = blame_round(0, kT0, kT0 + 12'300, nodes, kT0 + 50);
  CHECK_THAT(b.sentence, Contains("its join waited for a handshake slot (12.2 s, 7 connections"));
  CHECK(b.cause == BlameCause::kHandshake);
}

TEST_CASE("blame: nothing is claimed when no cause stands out, nor for a restart's late agent",
          "[timeline]") {
  const std::vector<NodeArrival> close{arrival(0, "a", kT0, kT0 + 300),
                                       arrival(1, "b", kT0 + 10, kT0 + 320)};
  RoundBlame b = blame_round(0, kT0, kT0 + 330, close, kT0);
  CHECK_THAT(b.sentence, Equals("round 0 formed in 0.3 s: the last node to join was node 1 (b), "
                                "0.0 s after the first"));
  CHECK(b.cause == BlameCause::kNone);
  // In a later round every agent is long started: its start says nothing of the wait.
  const std::vector<NodeArrival> later{arrival(0, "a", kT0, kT0 + 60'000),
                                       arrival(1, "b", kT0 + 30'000, kT0 + 65'000)};
  b = blame_round(1, kT0 + 59'000, kT0 + 65'000, later, kT0);
  CHECK(b.cause == BlameCause::kNone);
  CHECK_THAT(b.sentence, Contains("round 1 formed in 6.0 s"));
  // One node alone.
  b = blame_round(0, kT0, kT0 + 100, {arrival(0, "solo", kT0, kT0 + 100)}, kT0);
  CHECK_THAT(b.sentence, Equals("round 0 formed in 0.1 s (1 node, solo)"));
}

namespace {

NodeInfo node(const std::string& host, int nproc = 2) {
  NodeInfo n;
  n.host = host;
  n.addr = "10.0.0.1";
  n.nproc = nproc;
  for (int i = 0; i < nproc; ++i) n.devices.push_back(i);
  n.worker_port = 40000;
  return n;
}

struct Job {
  RendezvousState state;
  explicit Job(int nodes, int max_restarts) : state(job(nodes, max_restarts), t0) {}
  static JobSettings job(int nodes, int max_restarts) {
    JobSettings s;
    s.run_id = "job";
    s.min_nodes = s.max_nodes = nodes;
    s.max_restarts = max_restarts;
    return s;
  }
  std::vector<Outgoing> join(ClientId id, const std::string& host, int64_t started, Now at) {
    state.on_message(id, Hello{kMagic, kProtocolVersion, "job", ""}, at);
    Join j;
    j.node = node(host);
    j.min_nodes = j.max_nodes = state.settings().max_nodes;
    j.max_restarts = state.settings().max_restarts;
    j.started_ms = started;
    return state.on_message(id, j, at);
  }
};

}  // namespace

TEST_CASE("rdzv timeline: a late node is blamed once the round forms, in status too",
          "[timeline]") {
  Job job(3, 1);
  job.join(1, "host-a", kT0, t0 + 200ms);
  job.join(2, "host-b", kT0 + 50, t0 + 250ms);
  CHECK_FALSE(job.state.take_new_blame());
  const auto out = job.join(3, "host-c", kT0 + 3'000, t0 + 3'200ms);
  REQUIRE(npu_run::testing::message_to<Assigned>(out, 3) != nullptr);
  const auto blame = job.state.take_new_blame();
  REQUIRE(blame);
  CHECK_FALSE(job.state.take_new_blame());  // once
  CHECK_THAT(blame->sentence,
             Equals("round 0 formed in 3.2 s: the last node to join was node 2 (host-c), 3.0 s "
                    "after the first; its agent started 3.0 s late"));
  CHECK(blame->world_size == 6);
  CHECK(job.state.status(t0 + 4s).blame == blame->sentence);
  // Each node's start, contact, join and seat, with its node rank.
  size_t starts = 0;
  for (const TimelineEvent& e : job.state.timeline().events()) {
    if (e.phase != TimelinePhase::kAgentStart) continue;
    ++starts;
    if (e.host == "host-c") CHECK(e.time_ms == kT0 + 3'000);
    if (e.host == "host-c") CHECK(e.node == 2);
  }
  CHECK(starts == 3);
}

TEST_CASE("rdzv timeline: a report's events take the node's seat, its own ranks only",
          "[timeline]") {
  Job job(2, 1);
  job.join(1, "host-a", kT0, t0);
  job.join(2, "host-b", kT0, t0);
  Report r{0, Outcome::kFailed, FailureReport{}, 0};
  r.failure->rank = 2;
  r.failure->description = "exit code 3";
  TimelineEvent mine{-1, "forged", 2, 9, TimelinePhase::kFailed, kT0 + 900, -1, "exit code 3"};
  TimelineEvent other{-1, "", 0, 0, TimelinePhase::kLastBeat, kT0 + 800, 5, ""};
  r.timeline = {mine, other};
  job.state.on_message(2, r, t0 + 1s);
  job.state.on_message(1, Report{0, Outcome::kStopped, std::nullopt, 0}, t0 + 2s);
  const auto& events = job.state.timeline().events();
  const auto failed = std::find_if(events.begin(), events.end(), [](const TimelineEvent& e) {
    return e.phase == TimelinePhase::kFailed;
  });
  REQUIRE(failed != events.end());
  CHECK(failed->node == 1);
  CHECK(failed->host == "host-b");
  CHECK(failed->round == 0);  // the seat's round, not what the agent wrote
  CHECK(std::none_of(events.begin(), events.end(), [](const TimelineEvent& e) {
    return e.phase == TimelinePhase::kLastBeat;  // rank 0 is not host-b's
  }));
  REQUIRE(job.state.decisions().size() == 1);
  CHECK(job.state.decisions()[0].action == Action::kRestart);
  CHECK(events.back().phase == TimelinePhase::kRestart);
  CHECK_THAT(events.back().detail, Contains("restart 1; root cause: node 1 (host-b) rank 2"));
}

TEST_CASE("rdzv protocol: the timeline's fields travel, and too many events are refused",
          "[timeline]") {
  Join j;
  j.node = node("host-a");
  j.started_ms = kT0;
  j.dialled_ms = kT0 + 5;
  j.dials = 4;
  auto decoded = decode_client_message(encode(j));
  if (const auto* error = std::get_if<ProtocolError>(&decoded)) FAIL(error->message);
  const Join& back = std::get<Join>(std::get<ClientMessage>(decoded));
  CHECK(back.started_ms == kT0);
  CHECK(back.dialled_ms == kT0 + 5);
  CHECK(back.dials == 4);
  Report r{3, Outcome::kSucceeded, std::nullopt, 0};
  r.timeline.assign(Limits::kMaxReportEvents,
                    TimelineEvent{-1, "", 1, 0, TimelinePhase::kBeat, kT0, 7, "step 7"});
  decoded = decode_client_message(encode(r));
  REQUIRE(std::holds_alternative<ClientMessage>(decoded));
  CHECK(std::get<Report>(std::get<ClientMessage>(decoded)).timeline.size() ==
        Limits::kMaxReportEvents);
  r.timeline.push_back(r.timeline.back());
  CHECK(std::holds_alternative<ProtocolError>(decode_client_message(encode(r))));
}

namespace {

// One datagram to `path`, as a worker's beat.
void beat(const std::string& path, const std::string& text) {
  const int fd = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  REQUIRE(fd >= 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  (void)std::snprintf(addr.sun_path, sizeof addr.sun_path, "%s", path.c_str());
  ::sendto(fd, text.data(), text.size(), 0, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  ::close(fd);
}

}  // namespace

TEST_CASE(
    "timeline: an agent's beat samples halve and slow down as they fill, whatever the "
    "round's length",
    "[timeline]") {
  boost::asio::io_context io;
  npu_run::ProgressBeats beats(io, 2);
  AgentTimeline timeline(2);
  timeline.new_round(10);
  const size_t room = AgentTimeline::samples_per_rank(2);
  std::chrono::milliseconds interval = AgentTimeline::kFirstInterval;
  for (int step = 1; step <= 1000; ++step) {
    beat(beats.path(0), "step " + std::to_string(step));
    if (step % 2 == 0) beat(beats.path(1), "step " + std::to_string(step));
    beats.collect_now();
    interval = timeline.sample(beats);
  }
  CHECK(interval > AgentTimeline::kFirstInterval);  // it slowed down
  const auto events = timeline.take(&beats);
  size_t samples = 0;
  int64_t last_step = -1;
  for (const TimelineEvent& e : events) {
    if (e.rank != 10 || e.phase != TimelinePhase::kBeat) continue;
    ++samples;
    CHECK(e.step > last_step);  // in order, spread over the round
    last_step = e.step;
  }
  CHECK(samples < room);
  CHECK(samples >= room / 2 - 1);
  CHECK(last_step < 1000);
  const auto last = std::find_if(events.begin(), events.end(), [](const TimelineEvent& e) {
    return e.rank == 11 && e.phase == TimelinePhase::kLastBeat;
  });
  REQUIRE(last != events.end());
  CHECK(last->step == 1000);  // rank 11's last beat, its global rank
  CHECK(last->detail == "step 1000");
  CHECK(timeline.take(&beats).size() == 4);  // taken once: only the first and last beats again
}

}  // namespace test_timeline
