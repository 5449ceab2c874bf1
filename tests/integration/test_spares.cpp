// Hot spares (--spares) on loopback, each agent a host of its own (a UTS namespace): a lost
// node's seat goes to the spare and no other rank moves, the ledger of bad nodes names the lost
// host and keeps it out of the next launch, and a job with no spare left ends naming the
// shortfall.
#include <fmt/format.h>

#include <catch2/catch.hpp>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "support/harness.hpp"
#include "support/nodes.hpp"
#include "support/temp_dir.hpp"

namespace test_spares {

using namespace npu_run::testing;
using Catch::Matchers::Contains;

namespace {

// Each worker writes "<host> <GROUP_RANK> <RANK>" to $OUT/a<attempt>.r<RANK> and keeps its rank
// table as $OUT/t<attempt>.r<RANK>.json, then in attempt 0 waits to be stopped; in any later one
// it exits 0.
const std::string kRecordRanks =
    "echo \"$(hostname) $GROUP_RANK $RANK $WORLD_SIZE\" > "
    "\"$OUT/a$TORCHELASTIC_RESTART_COUNT.r$RANK\"; "
    "cp \"$RANK_TABLE_FILE\" \"$OUT/t$TORCHELASTIC_RESTART_COUNT.r$RANK.json\"; "
    "echo \"ready $RANK\"; [ \"$TORCHELASTIC_RESTART_COUNT\" = 0 ] && exec sleep 60; exit 0";

// Node `rank` of a 3-node job with one spare, on host `host`, with a rank table built through
// the rendezvous from each host's own device addresses (10.9.<rank>.1 and .2); node 0 first.
std::unique_ptr<NpuRunProcess> spare_job_node(int port, int rank, const std::string& host,
                                              const TempDir& dir,
                                              std::vector<std::string> more = {}) {
  const std::string hccn = dir.write("hccn." + host + ".conf",
                                     fmt::format("address_0=10.9.{0}.1\nnetmask_0=255.255.255.0\n"
                                                 "address_1=10.9.{0}.2\nnetmask_1=255.255.255.0\n",
                                                 rank));
  dir.write("dev/davinci0", "");
  dir.write("dev/davinci1", "");
  std::vector<std::string> flags = {
      "--node-rank", std::to_string(rank),     "--spares",     "1",    "--max-restarts", "0",
      "--ledger",    dir.file("ledger.jsonl"), "--rank-table", "auto", "--hccn-conf",    hccn};
  flags.insert(flags.end(), more.begin(), more.end());
  return start_node(
      port, 3, 2, kRecordRanks, flags,
      {{"OUT", dir.path()}, {kHostNameVariable, host}, {"NPU_RUN_DEV_ROOT", dir.file("dev")}});
}

// Each server of a rank table: "<device ip>=<rank id>,..." in server order.
std::vector<std::string> table_slots(const std::string& path) {
  const auto table = nlohmann::json::parse(read_file(path));
  std::vector<std::string> servers;
  for (const auto& server : table.at("server_list")) {
    std::string slot;
    for (const auto& device : server.at("device")) {
      slot += device.at("device_ip").get<std::string>() + "=" +
              device.at("rank_id").get<std::string>() + ",";
    }
    servers.push_back(slot);
  }
  return servers;
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
  // The rank table: node 1's slot holds the spare's device addresses with the same rank ids,
  // the other servers' slots are as they were; every worker has the same table.
  CHECK(table_slots(dir.file("t0.r0.json")) == std::vector<std::string>{"10.9.0.1=0,10.9.0.2=1,",
                                                                        "10.9.1.1=2,10.9.1.2=3,",
                                                                        "10.9.2.1=4,10.9.2.2=5,"});
  CHECK(table_slots(dir.file("t1.r0.json")) == std::vector<std::string>{"10.9.0.1=0,10.9.0.2=1,",
                                                                        "10.9.3.1=2,10.9.3.2=3,",
                                                                        "10.9.2.1=4,10.9.2.2=5,"});
  CHECK(read_file(dir.file("t1.r3.json")) == read_file(dir.file("t1.r0.json")));
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

TEST_CASE(
    "spares: an HCCL EI0006 on node 1 is the node's fault: the spare takes its seat, "
    "--max-restarts 0 is enough",
    "[integration][spares][classify]") {
  TempDir dir;
  const int port = unused_port();
  // Node 1's first worker names a link fault and fails; every other worker ends at once.
  const std::string script =
      "sleep 1; if [ \"$TORCHELASTIC_RESTART_COUNT\" = 0 ] && [ \"$GROUP_RANK\" = 1 ]; then "
      "echo '[ERROR] HCCL(7): EI0006: Getting socket times out.' >&2; exit 1; fi; "
      "echo \"ran $(hostname) $GROUP_RANK $RANK\"; exit 0";
  std::vector<std::unique_ptr<NpuRunProcess>> nodes;
  for (int rank = 0; rank < 3; ++rank) {
    nodes.push_back(start_node(port, 2, 1, script,
                               {"--node-rank", std::to_string(rank), "--spares", "1",
                                "--max-restarts", "0", "--ledger", dir.file("ledger.jsonl")},
                               {{kHostNameVariable, "host-" + std::to_string(rank)}}));
    if (rank == 0) nodes[0]->wait_for_output("rendezvous server on", 1, 20s, true);
  }
  const auto done = NpuRunProcess::wait_all({nodes[0].get(), nodes[1].get(), nodes[2].get()}, 40s);
  INFO(done[0].err << "\n---- node 1 ----\n" << done[1].err);
  for (const Finished& f : done) CHECK(f.exit_code == 0);
  CHECK_THAT(done[0].err, Contains("named a fault: HCCL could not set up a link to a peer in "
                                   "time (EI0006)") &&
                              Contains("not counted against --max-restarts (0 of 0 used)"));
  CHECK_THAT(done[1].err, Contains("node 1 (host-1) is taken out of the job: HCCL could not set "
                                   "up a link") &&
                              Contains("a spare takes its seat: leaving"));
  CHECK_THAT(done[2].out, Contains("ran host-2 1 1"));
  CHECK_THAT(read_file(dir.file("ledger.jsonl")),
             Contains("\"host\":\"host-1\"") && Contains("\"reason\":\"infrastructure fault\""));
  for (auto& n : nodes) require_no_strays(*n);
}

}  // namespace test_spares
