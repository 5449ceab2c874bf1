// `npu_run status --dump` in the rendezvous: the state machine asks every running node for its
// ranks' records and answers the asker once all came or at the deadline
// (rendezvous/state/live_dumps.hpp), with the rank the records put apart
// (rendezvous/state/dump_blame.hpp); the messages' wire form and the text `npu_run status --dump`
// prints.
#include <catch2/catch.hpp>

#include "agent/round/status_text.hpp"
#include "rendezvous/protocol/protocol.hpp"
#include "rendezvous/state/dump_blame.hpp"
#include "rendezvous/state/live_dumps.hpp"
#include "rendezvous/state/state.hpp"

namespace test_live_dumps {

using namespace npu_run;
using namespace npu_run::rdzv;
using Catch::Matchers::Contains;

namespace {

const Now t0{Clock::time_point{} + std::chrono::hours(1), 1'700'000'000'000};

// A rank whose recorder entered `entered` all_reduces of the default group, all but a waiting
// last one completed, each 61 s old.
RankStack recorded(int rank, int64_t entered, const std::string& frame) {
  RankStack s;
  s.rank = rank;
  s.local_rank = rank % 2;
  s.pid = 1000 + rank;
  s.frames = {frame};
  s.record = RankRecord::kServer;
  s.recorder = true;
  GroupCalls g{"default_pg", entered, entered - 1, {}};
  for (int64_t seq = std::max<int64_t>(1, entered - 1); seq <= entered; ++seq)
    g.last.push_back(RecordedCall{seq, "all_reduce", "[[4096]]", "Float", 61'000, seq < entered});
  s.groups = {g};
  return s;
}

struct Job {
  RendezvousState state{settings(), t0};
  static JobSettings settings() {
    JobSettings s;
    s.run_id = "job";
    s.min_nodes = s.max_nodes = 2;
    return s;
  }
  std::vector<Outgoing> send(ClientId id, const ClientMessage& m, Now now = t0) {
    return state.on_message(id, m, now);
  }
  void join(ClientId id, const std::string& host) {
    send(id, Hello{kMagic, kProtocolVersion, "job", ""});
    Join j;
    j.node.host = host;
    j.node.addr = "10.0.0." + std::to_string(id);
    j.node.nproc = 2;
    j.node.devices = {0, 1};
    j.min_nodes = j.max_nodes = 2;
    send(id, j);
  }
};

JobStatus answer_of(const std::vector<Outgoing>& out, ClientId to) {
  REQUIRE(out.size() == 1);
  CHECK(out[0].to == std::vector<ClientId>{to});
  const auto* status = std::get_if<JobStatus>(&out[0].message);
  REQUIRE(status != nullptr);
  REQUIRE(status->dump.has_value());
  return *status;
}

}  // namespace

TEST_CASE("live dumps: every running node is asked, and the asker answered once all sent theirs",
          "[unit][status]") {
  Job job;
  job.join(1, "host-a");
  job.join(2, "host-b");
  REQUIRE(job.state.phase() == RendezvousState::Phase::kRunning);
  const auto asked = job.send(1, StatusQuery{7, true});
  REQUIRE(asked.size() == 1);
  const auto* collect = std::get_if<CollectRecords>(&asked[0].message);
  REQUIRE(collect != nullptr);
  CHECK(asked[0].to == std::vector<ClientId>{1, 2});
  CHECK_FALSE(asked[0].close_after);
  CHECK(collect->round == 0);
  // Node 1's records: rank 2 never entered the all_reduce #6 ranks 0, 1 and 3 wait in.
  RecordsCollected a{collect->dump, "/run/a/attempt_0/*/dump_1", "", {}};
  a.stacks = {recorded(0, 6, "train.py:12 in <module>"), recorded(1, 6, "train.py:12 in <module>")};
  CHECK(job.send(1, a).empty());
  CHECK(job.send(1, a).empty());  // twice: counted once, nothing answered
  RecordsCollected b{collect->dump, "/run/b/attempt_0/*/dump_1", "", {}};
  b.stacks = {recorded(2, 5, "train.py:8 in load_batch"),
              recorded(3, 6, "train.py:12 in <module>")};
  const auto answered = job.send(2, b, t0 + std::chrono::milliseconds(400));
  const JobStatus status = answer_of(answered, 1);
  CHECK(status.query_id == 7);
  CHECK_FALSE(answered[0].close_after);  // an agent asked: its connection stays
  CHECK(status.phase == "running");
  const JobDump& d = *status.dump;
  CHECK(d.error.empty());
  CHECK(d.took_ms == 400);
  REQUIRE(d.nodes.size() == 2);
  CHECK(d.nodes[0].host == "host-a");
  CHECK(d.nodes[1].directory == "/run/b/attempt_0/*/dump_1");
  CHECK(d.silent_nodes.empty());
  CHECK(d.recorded);
  CHECK(d.odd_ranks == std::vector<int>{2});
  CHECK_THAT(d.blame, Contains("rank 2 never entered all_reduce #6 of the default group, which "
                               "ranks 0, 1 and 3 entered 61.0 s ago"));
  CHECK_THAT(d.blame, Contains("(rank 2 is on host-b)"));
  CHECK(d.nodes[0].stacks[0].groups.empty());  // the calls went into the blame, not the answer
  const std::string text = format_job_dump(d);
  CHECK_THAT(text, Contains("dump 1: 4 ranks on 2 nodes answered in 0.40 s"));
  CHECK_THAT(text, Contains("  rank 2  node 1 host-b  pid 1002  train.py:8 in load_batch  "
                            "[worker server, flight recorder]"));
  CHECK_THAT(text, Contains("apart: rank 2 never entered all_reduce #6"));
  CHECK_THAT(text, Contains("records: host-b:/run/b/attempt_0/*/dump_1"));
}

TEST_CASE("live dumps: a node that does not answer is named at the deadline, the rest answered",
          "[unit][status]") {
  Job job;
  job.join(1, "host-a");
  job.join(2, "host-b");
  job.send(9, Hello{kMagic, kProtocolVersion, "job", ""});  // npu_run status --master-addr
  const auto asked = job.send(9, StatusQuery{1, true});
  const uint64_t id = std::get<CollectRecords>(asked.at(0).message).dump;
  RecordsCollected a{id, "", "", {}};
  a.stacks = {recorded(0, 6, "train.py:12 in <module>"), recorded(1, 6, "train.py:12 in <module>")};
  CHECK(job.send(1, a).empty());
  CHECK(job.state.on_tick(t0 + (LiveDumps::kDeadline - std::chrono::milliseconds(1))).empty());
  const auto due = job.state.on_tick(t0 + LiveDumps::kDeadline);
  const JobStatus status = answer_of(due, 9);
  CHECK(due[0].close_after);  // its own connection ends with the answer
  CHECK(status.dump->silent_nodes == std::vector<int>{1});
  CHECK(status.dump->nodes.size() == 1);
  CHECK(status.dump->blame.empty());  // both ranks it has are level
  const std::string text = format_job_dump(*status.dump);
  CHECK_THAT(text, Contains("node 1 did not answer in time"));
  CHECK_THAT(text, Contains("apart: no rank stands apart from the others"));
  // Records after the answer count for nothing.
  CHECK(job.send(2, RecordsCollected{id, "", "", {}}).empty());
}

TEST_CASE("live dumps: refused while no worker runs, and past two dumps under way",
          "[unit][status]") {
  Job job;
  job.join(1, "host-a");
  const JobStatus joining = answer_of(job.send(1, StatusQuery{3, true}), 1);
  CHECK_THAT(joining.dump->error, Contains("the job is waiting for its nodes: no worker runs yet"));
  CHECK_THAT(format_job_dump(*joining.dump), Contains("dump: none collected: the job is waiting"));
  job.join(2, "host-b");
  CHECK(std::holds_alternative<CollectRecords>(job.send(1, StatusQuery{4, true}).at(0).message));
  CHECK(std::holds_alternative<CollectRecords>(job.send(2, StatusQuery{5, true}).at(0).message));
  const JobStatus busy = answer_of(job.send(1, StatusQuery{6, true}), 1);
  CHECK_THAT(busy.dump->error, Contains("2 dumps are being collected already; ask again"));
  // Records from a node that was not asked for that dump, or for none at all, are dropped.
  CHECK(job.send(1, RecordsCollected{99, "", "", {}}).empty());
}

TEST_CASE("live dumps: without recorders the odd stack out is named, and the lack said",
          "[unit][status]") {
  std::vector<RankStack> stacks(4);
  for (int r = 0; r < 4; ++r) {
    stacks[r].rank = r;
    stacks[r].frames = {r == 3 ? "train.py:8 in load_batch"
                               : "distributed_c10d.py:1 in all_reduce"};
  }
  std::vector<const RankStack*> pointers;
  for (const RankStack& s : stacks) pointers.push_back(&s);
  const DumpBlame blame = blame_dump(pointers, {"a", "a", "b", "b"});
  CHECK(blame.odd_ranks == std::vector<int>{3});
  CHECK_FALSE(blame.recorded);
  CHECK_THAT(blame.sentence, Contains("rank 3 on b is in train.py:8 in load_batch, where 3 of 4 "
                                      "ranks are in distributed_c10d.py:1 in all_reduce"));
  CHECK_THAT(blame.sentence, Contains("no rank had a flight recorder"));
  // Every rank in one place: nobody.
  stacks[3].frames = stacks[0].frames;
  CHECK(blame_dump(pointers, {"a", "a", "b", "b"}).sentence.empty());
}

TEST_CASE("live dumps: the messages and the dump keep every field on the wire", "[unit][status]") {
  RecordsCollected records{3, "/run/attempt_0/*/dump_3", "", {recorded(1, 6, "train.py:12 in x")}};
  auto client = decode_client_message(encode(ClientMessage{records}));
  REQUIRE(std::holds_alternative<ClientMessage>(client));
  const auto& back = std::get<RecordsCollected>(std::get<ClientMessage>(client));
  CHECK(back.dump == 3);
  CHECK(back.directory == records.directory);
  REQUIRE(back.stacks.size() == 1);
  CHECK(back.stacks[0].groups.size() == 1);
  auto query = decode_client_message(encode(ClientMessage{StatusQuery{5, true}}));
  CHECK(std::get<StatusQuery>(std::get<ClientMessage>(query)).dump);
  auto collect = decode_server_message(encode(ServerMessage{CollectRecords{3, 2}}));
  CHECK(std::get<CollectRecords>(std::get<ServerMessage>(collect)).round == 2);
  JobStatus status;
  status.run_id = "job";
  status.phase = "running";
  status.dump =
      JobDump{3,   "",   120, {NodeDump{1, "host-b", "/d", "", records.stacks}}, {0}, "rank 1 ...",
              {1}, true, 5};
  auto server = decode_server_message(encode(ServerMessage{status}));
  REQUIRE(std::holds_alternative<ServerMessage>(server));
  const JobDump& d = *std::get<JobStatus>(std::get<ServerMessage>(server)).dump;
  CHECK(d.id == 3);
  CHECK(d.took_ms == 120);
  CHECK(d.nodes.at(0).host == "host-b");
  CHECK(d.silent_nodes == std::vector<int>{0});
  CHECK(d.odd_ranks == std::vector<int>{1});
  CHECK(d.recorded);
  CHECK(d.unlisted == 5);
  CHECK_THAT(format_job_dump(d), Contains("(5 more ranks not listed)"));
}

}  // namespace test_live_dumps
