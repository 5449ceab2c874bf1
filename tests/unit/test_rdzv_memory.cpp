// The rendezvous state machine, driven directly: the job's memory a successor leader continues
// from (an etcd rendezvous), and which agents reach etcd.
#include <catch2/catch.hpp>

#include "rendezvous/state/state.hpp"
#include "support/rdzv_job.hpp"

namespace test_rdzv_memory {

using namespace npu_run::rdzv;
using namespace npu_run::testing::rdzv_job;
using Catch::Matchers::Contains;
using npu_run::testing::message_to;
using namespace std::chrono_literals;

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

}  // namespace test_rdzv_memory
