// Framing and message codec of the rendezvous protocol.
#include <catch2/catch.hpp>

#include "rendezvous/protocol/protocol.hpp"

namespace test_rdzv_protocol {

using namespace npu_run::rdzv;
using Catch::Matchers::Contains;
using npu_run::kExitRendezvous;

namespace {

NodeInfo sample_node() {
  NodeInfo n;
  n.host = "host-a";
  n.addr = "10.0.0.1";
  n.nproc = 2;
  n.devices = {4, 5};
  n.device_ips = {"192.168.1.4", "192.168.1.5"};
  n.worker_port = 41000;
  return n;
}

template <typename T>
T round_trip_client(const ClientMessage& m) {
  auto decoded = decode_client_message(encode(m));
  if (auto* e = std::get_if<ProtocolError>(&decoded)) FAIL(e->message);
  return std::get<T>(std::get<ClientMessage>(decoded));
}

template <typename T>
T round_trip_server(const ServerMessage& m) {
  auto decoded = decode_server_message(encode(m));
  if (auto* e = std::get_if<ProtocolError>(&decoded)) FAIL(e->message);
  return std::get<T>(std::get<ServerMessage>(decoded));
}

std::string client_error(const std::string& json) {
  auto decoded = decode_client_message(json);
  REQUIRE(std::holds_alternative<ProtocolError>(decoded));
  return std::get<ProtocolError>(decoded).message;
}

}  // namespace

TEST_CASE("frames: split anywhere, joined correctly", "[protocol]") {
  const std::string stream =
      encode_frame("first") + encode_frame("") + encode_frame(std::string(70000, 'x'));
  for (size_t chunk : {size_t{1}, size_t{3}, size_t{4}, size_t{5}, size_t{4096}, stream.size()}) {
    FrameDecoder decoder(Limits::kMaxServerFrame);
    std::vector<std::string> frames;
    for (size_t pos = 0; pos < stream.size(); pos += chunk) {
      REQUIRE_FALSE(decoder.feed(std::string_view(stream).substr(pos, chunk), frames));
    }
    REQUIRE(frames.size() == 3);
    CHECK(frames[0] == "first");
    CHECK(frames[1].empty());
    CHECK(frames[2].size() == 70000);
    CHECK(decoder.buffered() == 0);
  }
}

TEST_CASE("frames: an oversized length is refused before its payload is buffered", "[protocol]") {
  FrameDecoder decoder(Limits::kMaxClientFrame);
  std::vector<std::string> frames;
  const std::string four_gib = "\xff\xff\xff\xff";
  const auto error = decoder.feed(four_gib, frames);
  REQUIRE(error);
  CHECK(error->code == "too_large");
  CHECK_THAT(error->message, Contains("4294967295 bytes exceeds the limit of 65536"));
  CHECK(decoder.buffered() == 0);
  CHECK(decoder.feed(encode_frame("{}"), frames));  // stays failed
  CHECK(frames.empty());
}

TEST_CASE("frames: a frame cut short waits for the rest", "[protocol]") {
  FrameDecoder decoder(Limits::kMaxClientFrame);
  std::vector<std::string> frames;
  const std::string frame = encode_frame("{\"type\":\"heartbeat\"}");
  REQUIRE_FALSE(decoder.feed(frame.substr(0, 7), frames));
  CHECK(frames.empty());
  CHECK(decoder.buffered() == 7);
}

TEST_CASE("messages: every client message survives encode and decode", "[protocol]") {
  const Hello h =
      round_trip_client<Hello>(Hello{kMagic, kProtocolVersion, "job-1", "ab12", "5e55"});
  CHECK(h.session == "5e55");
  CHECK(h.magic == kMagic);
  CHECK(h.run_id == "job-1");
  CHECK(h.nonce == "ab12");
  CHECK(round_trip_client<Auth>(Auth{"cafe"}).proof == "cafe");

  Join j;
  j.node = sample_node();
  j.node_rank = 3;
  j.min_nodes = 2;
  j.max_nodes = 4;
  j.max_restarts = 1;
  j.want_peers = true;
  j.command = "train.py --cfg a.yaml";
  const Join jj = round_trip_client<Join>(j);
  CHECK(jj.command == "train.py --cfg a.yaml");
  CHECK(jj.node.host == "host-a");
  CHECK(jj.node.devices == std::vector<int>{4, 5});
  CHECK(jj.node.device_ips.size() == 2);
  CHECK(jj.node.worker_port == 41000);
  CHECK(jj.node_rank == 3);
  CHECK(jj.max_nodes == 4);
  CHECK(jj.want_peers);
  j.node_rank.reset();
  CHECK_FALSE(round_trip_client<Join>(j).node_rank);

  FailureReport f;
  f.host = "host-b";
  f.node_rank = 1;
  f.rank = 9;
  f.local_rank = 1;
  f.pid = 4321;
  f.exit_code = 3;
  f.description = "exit code 3";
  f.error_message = "ValueError: x";
  f.time_ms = 1700000000000;
  const Report r = round_trip_client<Report>(Report{7, Outcome::kFailed, f, 0});
  CHECK(r.round == 7);
  CHECK(r.outcome == Outcome::kFailed);
  CHECK(r.failure->rank == 9);
  CHECK(r.failure->error_message == "ValueError: x");
  CHECK(r.failure->time_ms == 1700000000000);
  CHECK_FALSE(r.failure->stopped_after_error);
  f.stopped_after_error = true;
  CHECK(round_trip_client<Report>(Report{7, Outcome::kStopped, f, 0}).failure->stopped_after_error);
  // A hang, and whether the attempt got further than the ones before (--max-no-progress-restarts).
  CHECK_FALSE(r.failure->hang);
  CHECK(r.progressed);
  f.hang = true;
  Report no_progress{7, Outcome::kFailed, f, 0};
  no_progress.progressed = false;
  const Report hung = round_trip_client<Report>(no_progress);
  CHECK(hung.failure->hang);
  CHECK_FALSE(hung.progressed);
  // Where each rank was at a hang's dump; a rank stack without frames or with too many is bad.
  RankStack stack{9, 1, 4321, {"loader.py:88 in wait", "train.py:1 in main"}, "step 4", 2100};
  no_progress.stacks = {stack};
  const Report with_stacks = round_trip_client<Report>(no_progress);
  REQUIRE(with_stacks.stacks.size() == 1);
  CHECK(with_stacks.stacks[0].frames == stack.frames);
  CHECK((with_stacks.stacks[0].rank == 9 && with_stacks.stacks[0].pid == 4321));
  CHECK((with_stacks.stacks[0].last_beat == "step 4" && with_stacks.stacks[0].silence_ms == 2100));
  CHECK(round_trip_client<Report>(Report{7, Outcome::kFailed, f, 0}).stacks.empty());
  for (const std::vector<std::string>& frames :
       {std::vector<std::string>{}, std::vector<std::string>(4, "a.py:1 in f"),
        std::vector<std::string>{std::string(Limits::kMaxFrameText + 1, 'x')}}) {
    no_progress.stacks = {RankStack{9, 1, 4321, frames, "", -1}};
    CHECK(std::holds_alternative<ProtocolError>(decode_client_message(encode(no_progress))));
  }
  const HangNotice notice = round_trip_client<HangNotice>(HangNotice{7, f});
  CHECK((notice.round == 7 && notice.failure.hang && notice.failure.rank == 9));
  CHECK(sequenced(ClientMessage{notice}));  // kept across a resume, like a report
  CHECK(round_trip_client<Heartbeat>(Heartbeat{12}).received == 12);
  // An etcd rendezvous' agents say whether they reach etcd; others say nothing of it.
  CHECK_FALSE(round_trip_client<Heartbeat>(Heartbeat{1}).etcd.has_value());
  Heartbeat with_etcd{1};
  with_etcd.etcd = true;
  CHECK(round_trip_client<Heartbeat>(with_etcd).etcd == std::optional<bool>(true));
  with_etcd.etcd = false;
  CHECK(round_trip_client<Heartbeat>(with_etcd).etcd == std::optional<bool>(false));
  const Resume resume = round_trip_client<Resume>(Resume{"5e55", 3});
  CHECK((resume.session == "5e55" && resume.received == 3));
  // A session key is as long as a nonce at most; counts are never negative.
  CHECK(std::holds_alternative<ProtocolError>(decode_client_message(
      R"({"type":"resume","session":")" + std::string(65, 'a') + R"(","received":0})")));
  CHECK(std::holds_alternative<ProtocolError>(
      decode_client_message(R"({"type":"heartbeat","received":-1})")));
  // Only the session's content is sequenced: never the handshake, liveness or the resume.
  CHECK(sequenced(ClientMessage{Join{}}));
  CHECK(sequenced(ClientMessage{Report{}}));
  CHECK_FALSE(sequenced(ClientMessage{Heartbeat{}}));
  CHECK_FALSE(sequenced(ClientMessage{Resume{}}));
  CHECK_FALSE(sequenced(ClientMessage{Hello{}}));
}

TEST_CASE("messages: every server message survives encode and decode", "[protocol]") {
  CHECK(round_trip_server<Welcome>(Welcome{5000, 30000}).heartbeat_timeout_ms == 30000);
  const Challenge c = round_trip_server<Challenge>(Challenge{"n0", "p0"});
  CHECK((c.nonce == "n0" && c.proof == "p0"));
  const ErrorReply e = round_trip_server<ErrorReply>(ErrorReply{"job_full", "all 2 nodes"});
  CHECK(e.code == "job_full");
  CHECK(round_trip_server<Progress>(Progress{2, 4, {1, 3}}).missing_node_ranks ==
        std::vector<int>{1, 3});
  Assigned a{3, 1, 1, 2, 8, 4, "10.0.0.1", 41000, {PeerInfo{0, 0, sample_node()}}};
  const Assigned aa = round_trip_server<Assigned>(a);
  CHECK(aa.round == 3);
  CHECK(aa.restart_count == 1);
  CHECK(aa.rank_offset == 4);
  CHECK(aa.master_port == 41000);
  REQUIRE(aa.peers.size() == 1);
  CHECK(aa.peers[0].node.addr == "10.0.0.1");
  FailureReport f;
  f.description = "agent lost";
  f.exit_code = kExitRendezvous;
  CHECK(round_trip_server<StopWorkers>(StopWorkers{2, f}).root_cause.exit_code == kExitRendezvous);
  const Reform r = round_trip_server<Reform>(Reform{3, "node-c", 2, "left the job"});
  CHECK(r.round == 3);
  CHECK(r.host == "node-c");
  CHECK(r.node_rank == 2);
  CHECK(r.reason == "left the job");
  const Decision d = round_trip_server<Decision>(Decision{2, Action::kRestart, 1, 0, f});
  CHECK(d.action == Action::kRestart);
  CHECK(d.root_cause->description == "agent lost");
  CHECK(d.odd_ranks.empty());
  Decision hang_decision{2, Action::kFinish, 0, 124, f};
  hang_decision.odd_ranks = {3, 12};
  CHECK(round_trip_server<Decision>(hang_decision).odd_ranks == std::vector<int>{3, 12});
  hang_decision.odd_ranks.assign(Limits::kMaxOddRanks + 1, 1);
  CHECK(std::holds_alternative<ProtocolError>(decode_server_message(encode(hang_decision))));
  CHECK_FALSE(
      round_trip_server<Decision>(Decision{2, Action::kFinish, 0, 0, std::nullopt}).root_cause);
  // The restart classification: the evidence a failure carries, the class and why.
  FailureReport raised = f;
  raised.lost = true;
  raised.evidence = FailureEvidence{"HCCS link error: x",
                                    "ValueError",
                                    "train.py:88 in step",
                                    "step 3",
                                    "last: line",
                                    true,
                                    true,
                                    true};
  Decision classified{4, Action::kFinish, 1, 123, raised};
  classified.failure_class = FailureClass::kDeterministic;
  classified.class_reason = "deterministic: ValueError at train.py:88 in step, twice";
  classified.restarts_charged = 1;
  const Decision back = round_trip_server<Decision>(classified);
  CHECK(back.failure_class == FailureClass::kDeterministic);
  CHECK(back.class_reason == classified.class_reason);
  CHECK(back.restarts_charged == 1);
  CHECK(back.root_cause->lost);
  const FailureEvidence& seen = back.root_cause->evidence;
  CHECK(seen.fault == "HCCS link error: x");
  CHECK(seen.exception == "ValueError");
  CHECK(seen.frame == "train.py:88 in step");
  CHECK(seen.last_beat == "step 3");
  CHECK(seen.last_line == "last: line");
  CHECK((seen.early && seen.usage && seen.oom));
  CHECK(round_trip_server<Decision>(Decision{}).failure_class == FailureClass::kNone);
  classified.root_cause->evidence.frame.assign(Limits::kMaxEvidenceText + 1, 'x');
  CHECK(std::holds_alternative<ProtocolError>(decode_server_message(encode(classified))));
  CHECK(round_trip_server<HeartbeatAck>(HeartbeatAck{4}).received == 4);
  CHECK(round_trip_server<Resumed>(Resumed{9}).received == 9);
  CHECK(sequenced(ServerMessage{Assigned{}}));
  CHECK(sequenced(ServerMessage{Decision{}}));
  CHECK_FALSE(sequenced(ServerMessage{Welcome{}}));
  CHECK_FALSE(sequenced(ServerMessage{Resumed{}}));
  CHECK_FALSE(sequenced(ServerMessage{HeartbeatAck{}}));
  CHECK_FALSE(sequenced(ServerMessage{ErrorReply{}}));
}

TEST_CASE("messages: every server reply carries ok or error", "[protocol]") {
  CHECK_THAT(encode(ServerMessage{HeartbeatAck{}}), Contains("\"ok\":true"));
  CHECK_THAT(encode(ServerMessage{ErrorReply{"c", "m"}}),
             Contains("\"ok\":false") && Contains("\"error\":{"));
}

TEST_CASE("messages: garbage and wrong shapes are protocol errors, never crashes", "[protocol]") {
  CHECK_THAT(client_error("not json"), Contains("not valid JSON"));
  CHECK_THAT(client_error("[1,2]"), Contains("is not a JSON object"));
  CHECK_THAT(client_error("{}"), Contains("lacks 'type'"));
  CHECK_THAT(client_error(R"({"type":"dance"})"), Contains("unknown type 'dance'"));
  CHECK_THAT(client_error(R"({"type":"hello","magic":1,"version":1,"run_id":"x"})"),
             Contains("'magic' is not a string"));
  CHECK_THAT(client_error(R"({"type":"hello","magic":"m","version":1.5,"run_id":"x"})"),
             Contains("'version' is not an integer"));
  CHECK_THAT(client_error(R"({"type":"hello","magic":"m","version":1,"run_id":")" +
                          std::string(200, 'r') + "\"}"),
             Contains("'run_id' is longer than 128 bytes"));
  CHECK_THAT(client_error(R"({"type":"auth","proof":")" + std::string(65, 'f') + "\"}"),
             Contains("'proof' is longer than 64 bytes"));
  CHECK_THAT(client_error(R"({"type":"auth"})"), Contains("lacks 'proof'"));
  const std::string node = R"({"host":"h","addr":"a","nproc":2,"devices":[0],"worker_port":1})";
  CHECK_THAT(client_error(R"({"type":"join","node":)" + node +
                          R"(,"min_nodes":1,"max_nodes":1,"max_restarts":0})"),
             Contains("lists 1 devices for 2 workers"));
  CHECK_THAT(
      client_error(
          R"({"type":"join","node":{"host":"h","addr":"a","nproc":0,"devices":[],"worker_port":1},)"
          R"("min_nodes":1,"max_nodes":1,"max_restarts":0})"),
      Contains("'nproc' = 0 is outside 1..4096"));
  CHECK_THAT(client_error(R"({"type":"report","round":0,"outcome":"failed"})"),
             Contains("failure without describing"));
  CHECK_THAT(client_error(R"({"type":"report","round":-1,"outcome":"succeeded"})"),
             Contains("'round' = -1"));
  CHECK_THAT(
      client_error(R"({"type":"report","round":18446744073709551615,"outcome":"succeeded"})"),
      Contains("'round'"));
  std::string deep(10000, '[');
  CHECK_THAT(client_error(deep), Contains("not valid JSON"));
}

}  // namespace test_rdzv_protocol
