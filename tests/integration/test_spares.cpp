// Hot spares (--spares) on loopback, each agent a host of its own (a UTS namespace): a lost
// node's seat goes to the spare and no other rank moves, the ledger of bad nodes names the lost
// host and keeps it out of the next launch, and a job with no spare left ends naming the
// shortfall.
#include <catch2/catch.hpp>
#include <csignal>
#include <filesystem>
#include <fstream>

#include "support/harness.hpp"
#include "support/nodes.hpp"
#include "support/temp_dir.hpp"

using namespace npu_run::testing;
using Catch::Matchers::Contains;

namespace {

// Each worker writes "<host> <GROUP_RANK> <RANK>" to $OUT/a<attempt>.r<RANK>, then in attempt 0
// waits to be stopped; in any later one it exits 0.
const std::string kRecordRanks =
    "echo \"$(hostname) $GROUP_RANK $RANK $WORLD_SIZE\" > "
    "\"$OUT/a$TORCHELASTIC_RESTART_COUNT.r$RANK\"; "
    "echo \"ready $RANK\"; [ \"$TORCHELASTIC_RESTART_COUNT\" = 0 ] && exec sleep 60; exit 0";

// Node `rank` of a 3-node job with one spare, on host `host`; node 0 first, alone.
std::unique_ptr<NpuRunProcess> spare_job_node(int port, int rank, const std::string& host,
                                              const TempDir& dir,
                                              std::vector<std::string> more = {}) {
  std::vector<std::string> flags = {"--node-rank", std::to_string(rank),    "--spares",
                                    "1",           "--max-restarts",        "0",
                                    "--ledger",    dir.file("ledger.jsonl")};
  flags.insert(flags.end(), more.begin(), more.end());
  return start_node(port, 3, 2, kRecordRanks, flags,
                    {{"OUT", dir.path()}, {kHostNameVariable, host}});
}

std::string record(const TempDir& dir, int attempt, int rank) {
  return read_file(dir.file("a" + std::to_string(attempt) + ".r" + std::to_string(rank)));
}

}  // namespace

TEST_CASE("spares: a lost node's seat goes to the spare, no other rank moves, the ledger has it",
          "[integration][spares]") {
  TempDir dir;
  const int port = unused_port();
  auto n0 = spare_job_node(port, 0, "host-a", dir);
  n0->wait_for_output("rendezvous server on", 1, 20s, true);
  auto n1 = spare_job_node(port, 1, "host-b", dir);
  auto n2 = spare_job_node(port, 2, "host-c", dir);
  auto spare = spare_job_node(port, 3, "host-d", dir);
  for (auto* n : {n0.get(), n1.get(), n2.get()}) n->wait_for_output("ready", 2, 20s);
  spare->wait_for_output("standing by as a spare of round 0 (3 nodes run, 1 spare wait)", 1, 20s,
                         true);
  n1->send_signal(SIGKILL);  // its workers die with it (PR_SET_PDEATHSIG)
  const auto done = NpuRunProcess::wait_all({n0.get(), n2.get(), spare.get()}, 40s);
  INFO(done[0].err << "\n---- spare ----\n" << done[2].err);
  for (const Finished& f : done) CHECK(f.exit_code == 0);
  // Attempt 1: nodes 0 and 2 where they were, the spare as node 1 with node 1's ranks.
  CHECK(record(dir, 1, 0) == "host-a 0 0 6\n");
  CHECK(record(dir, 1, 1) == "host-a 0 1 6\n");
  CHECK(record(dir, 1, 2) == "host-d 1 2 6\n");
  CHECK(record(dir, 1, 3) == "host-d 1 3 6\n");
  CHECK(record(dir, 1, 4) == "host-c 2 4 6\n");
  CHECK(record(dir, 1, 5) == "host-c 2 5 6\n");
  CHECK(record(dir, 0, 2) == "host-b 1 2 6\n");
  CHECK_THAT(done[0].err, Contains("[infrastructure: node 1 (host-b) was lost]") &&
                              Contains("not counted against --max-restarts (0 of 0 used)"));
  CHECK_THAT(done[0].err, Contains("node 1 (host-b, 127.0.0.1) is taken out of the job (lost)"));
  const std::string ledger = read_file(dir.file("ledger.jsonl"));
  CHECK_THAT(ledger, Contains("\"host\":\"host-b\"") && Contains("\"reason\":\"lost\""));
  n1->wait(10s);
  for (auto* n : {n0.get(), n1.get(), n2.get(), spare.get()}) require_no_strays(*n);

  // A later launch given the ledger refuses host-b's agent, naming the entry.
  const int port2 = unused_port();
  auto m0 = spare_job_node(port2, 0, "host-a", dir);
  m0->wait_for_output("rendezvous server on", 1, 20s, true);
  auto refused = spare_job_node(port2, 1, "host-b", dir);
  const Finished r = refused->wait(20s);
  INFO(r.err);
  CHECK(r.exit_code == 125);
  CHECK_THAT(r.err, Contains("host-b is in the ledger of bad nodes (lost at ") &&
                        Contains("npu_run ledger clear host-b"));
  // Cleared, it may join again.
  const Finished list = run_npu_run({"ledger", "list", "--ledger", dir.file("ledger.jsonl")});
  CHECK_THAT(list.out, Contains("host-b  lost at "));
  const Finished cleared =
      run_npu_run({"ledger", "clear", "host-b", "--ledger", dir.file("ledger.jsonl")});
  CHECK_THAT(cleared.out, Contains("host-b: cleared"));
  CHECK(run_npu_run({"ledger", "list", "--hosts-only", "--ledger", dir.file("ledger.jsonl")})
            .out.empty());
  m0->send_signal(SIGTERM);
  m0->wait(20s);
  require_no_strays(*m0);
  require_no_strays(*refused);
}

TEST_CASE("spares: with the spare used up a second loss ends a static job with 125, naming it",
          "[integration][spares]") {
  TempDir dir;
  const int port = unused_port();
  const std::string never_done = "echo \"ready $RANK\"; exec sleep 60";
  std::vector<std::unique_ptr<NpuRunProcess>> nodes;
  for (int rank = 0; rank < 4; ++rank) {
    nodes.push_back(start_node(port, 3, 1, never_done,
                               {"--node-rank", std::to_string(rank), "--spares", "1"},
                               {{kHostNameVariable, "host-" + std::to_string(rank)}}));
    if (rank == 0) nodes[0]->wait_for_output("rendezvous server on", 1, 20s, true);
  }
  for (int rank = 0; rank < 3; ++rank) nodes[rank]->wait_for_output("ready", 1, 20s);
  nodes[3]->wait_for_output("standing by as a spare", 1, 20s, true);
  nodes[1]->send_signal(SIGKILL);
  nodes[3]->wait_for_output("ready", 1, 20s);  // the spare runs node 1's worker
  nodes[2]->send_signal(SIGKILL);
  const auto done = NpuRunProcess::wait_all({nodes[0].get(), nodes[3].get()}, 40s);
  INFO(done[0].err);
  for (const Finished& f : done) CHECK(f.exit_code == 125);
  CHECK_THAT(done[0].err,
             Contains("failure class: infrastructure: node 2 (host-2) was lost; no spare is "
                      "left to take its place"));
  for (auto& n : nodes) {
    if (n != nodes[0] && n != nodes[3]) n->wait(10s);
    require_no_strays(*n);
  }
}
