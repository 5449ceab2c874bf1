// MindSpore's dynamic cluster through npu_run (--framework mindspore, no rank table): node 0's
// agent starts the scheduler beside its workers and supervises both. There is no MindSpore
// here: tests/tools/fake_mindspore.py keeps the contract MindSpore's init() relies on (the
// scheduler listens on MS_SCHED_HOST:MS_SCHED_PORT and waits for MS_WORKER_NUM workers with
// distinct MS_NODE_IDs; workers register and wait for it), so a wrong variable, a missing or
// late scheduler, or a port another process holds fails these tests as it would fail MindSpore.
#include <fmt/format.h>

#include <catch2/catch.hpp>
#include <csignal>
#include <regex>
#include <set>

#include "support/fixtures.hpp"
#include "support/harness.hpp"
#include "support/temp_dir.hpp"

namespace test_mindspore {

using namespace npu_run::testing;
using Catch::Matchers::Contains;

namespace {

std::string fake_mindspore() {
  return source_dir() + "/tests/tools/fake_mindspore.py";
}

// The MS_NODE_IDs of the workers that ran (each prints "worker <id> of <n> runs ...").
std::set<int> worker_ids(const std::string& out) {
  std::set<int> ids;
  const std::regex line("worker ([0-9]+) of ([0-9]+) runs");
  for (auto it = std::sregex_iterator(out.begin(), out.end(), line); it != std::sregex_iterator();
       ++it)
    ids.insert(std::stoi((*it)[1]));
  return ids;
}

}  // namespace

TEST_CASE(
    "mindspore: node 0 starts the scheduler, four workers register with distinct ids and the "
    "job ends 0",
    "[integration][mindspore]") {
  TempDir logs;
  // Inherited from a torch_npu_run habit: it must not reach MindSpore's workers.
  NpuRunProcess p({"--framework", "mindspore", "--nproc-per-node", "4", "--log-dir", logs.path(),
                   "-t", "3", fake_mindspore()},
                  {{"TORCH_NPU_USE_PARALLEL_TCPSTORE", "True"}, {"MS_ROLE", "MS_SCHED"}});
  const Finished f = p.wait(60s);
  INFO(f.out << f.err);
  CHECK(f.exit_code == 0);
  CHECK(worker_ids(f.out) == std::set<int>{0, 1, 2, 3});
  CHECK_THAT(f.out, Contains("[scheduler] scheduler up on 127.0.0.1:"));
  CHECK_THAT(f.out,
             Contains("MS_ROLE=MS_SCHED") && Contains("RANK_ID=0 RANK_SIZE=4 DEVICE_ID=None"));
  CHECK_THAT(f.out, Contains("[scheduler] scheduler: cluster finished"));
  CHECK_THAT(f.out, Contains("MS_NODE_ID=3 MS_NODE_RANK=0 MS_TOPO_TIMEOUT=900 RANK_ID=3"));
  CHECK_THAT(f.out, !Contains("TORCH_NPU_USE_PARALLEL_TCPSTORE=True"));
  CHECK_THAT(f.err, Contains("all 4 workers and MindSpore's scheduler exited 0"));
  // Its output has files of its own beside the ranks'.
  const std::string run = run_dir(logs.path());
  CHECK_THAT(read_file(run + "/attempt_0/scheduler/stdout.log"), Contains("cluster finished"));
  require_no_strays(p);
}

TEST_CASE(
    "mindspore: a failing worker's code is the job's, and a restart starts the scheduler "
    "again",
    "[integration][mindspore]") {
  Finished f = run_npu_run({"--framework", "mindspore", "--nproc-per-node", "4", fake_mindspore()},
                           {{"FAKE_MS_FAIL", "2"}});
  INFO(f.out << f.err);
  CHECK(f.exit_code == 7);  // msrun exits 1 whatever failed
  CHECK_THAT(f.err, Contains("exit code 7"));
  NpuRunProcess p({"--framework", "mindspore", "--nproc-per-node", "4", "--max-restarts", "1",
                   fake_mindspore()},
                  {{"FAKE_MS_FAIL", "2"}});
  f = p.wait(60s);
  INFO(f.out << f.err);
  CHECK(f.exit_code == 0);
  CHECK_THAT(f.out, Contains("for 4 workers (attempt 0)") && Contains("for 4 workers (attempt 1)"));
  CHECK(count_occurrences(f.out, "scheduler: cluster finished") == 1);
  require_no_strays(p);
}

TEST_CASE("mindspore: a scheduler that fails fails the job, named as the root cause",
          "[integration][mindspore]") {
  NpuRunProcess p({"--framework", "mindspore", "--nproc-per-node", "2", fake_mindspore()},
                  {{"FAKE_MS_SCHED_FAIL", "1"}});
  const Finished f = p.wait(60s);
  INFO(f.out << f.err);
  CHECK(f.exit_code == 3);
  CHECK_THAT(f.err, Contains("MindSpore's scheduler (pid ") && Contains("failed with exit code 3"));
  // The summary's root-cause row is the scheduler's.
  CHECK(std::regex_search(
      f.err, std::regex(R"(\*\s+\S+\s+\S+\s+0\s+scheduler\s+-\s+[0-9]+\s+exit code 3)")));
  require_no_strays(p);
}

TEST_CASE("mindspore: two nodes, the scheduler on node 0 only, every worker's id its global rank",
          "[integration][mindspore]") {
  const std::string port = std::to_string(unused_port());
  auto node = [&](const char* rank) {
    return std::vector<std::string>{"--framework",   "mindspore", "--nnodes",         "2",
                                    "--node-rank",   rank,        "--nproc-per-node", "2",
                                    "--master-port", port,        fake_mindspore()};
  };
  NpuRunProcess n0(node("0"));
  NpuRunProcess n1(node("1"));
  const std::vector<Finished> f = NpuRunProcess::wait_all({&n0, &n1}, 90s);
  INFO(f[0].err << f[1].err);
  CHECK(f[0].exit_code == 0);
  CHECK(f[1].exit_code == 0);
  CHECK(worker_ids(f[0].out) == std::set<int>{0, 1});
  CHECK(worker_ids(f[1].out) == std::set<int>{2, 3});
  CHECK_THAT(f[0].out, Contains("[scheduler] scheduler up") && Contains("for 4 workers"));
  CHECK_THAT(f[1].out, !Contains("[scheduler]"));
  CHECK_THAT(f[1].out, Contains("MS_NODE_ID=3 MS_NODE_RANK=1"));
  require_no_strays(n0);
  require_no_strays(n1);
}

TEST_CASE("mindspore: SIGKILL of the agent leaves neither the scheduler nor a worker",
          "[integration][mindspore]") {
  NpuRunProcess p({"--framework", "mindspore", "--nproc-per-node", "2", fake_mindspore()},
                  {{"FAKE_MS_TRAIN_SECONDS", "120"}});
  p.wait_for_output("runs MS_ROLE=MS_WORKER", 2, 30s);
  p.send_signal(SIGKILL);
  p.wait(30s);
  require_no_strays(p);
}

TEST_CASE(
    "mindspore: a scheduler lingering after its workers is stopped at once by a SIGTERM to "
    "npu_run",
    "[integration][mindspore]") {
  NpuRunProcess p({"--framework", "mindspore", "--nproc-per-node", "2", fake_mindspore()},
                  {{"FAKE_MS_SCHED_LINGER", "120"}});
  p.wait_for_output("scheduler: cluster finished", 1, 30s);
  p.send_signal(SIGTERM);
  const Finished f = p.wait(20s);  // not the 30 s grace, nor the 120 s linger
  INFO(f.out << f.err);
  CHECK(f.exit_code == 143);
  CHECK(f.seconds < 15);
  require_no_strays(p);
}

namespace {

// A fake Ascend server with eight NPUs (/dev/davinci0-7 under NPU_RUN_DEV_ROOT).
std::string eight_npus(const TempDir& dir) {
  const std::string root = dir.file("dev");
  for (int i = 0; i < 8; ++i) dir.write("dev/davinci" + std::to_string(i), "");
  dir.write("dev/davinci_manager", "");
  return root;
}

// Each process prints what the model zoo's loop exports, and whether RANK_TABLE_FILE is
// byte for byte hccl_tools.py's table (argv[1]).
const char* const kLoopContract =
    "import os, sys\n"
    "same = open(os.environ['RANK_TABLE_FILE']).read() == open(sys.argv[1]).read()\n"
    "sys.stdout.write('rank %s device %s size %s num %s role %s table-same %s\\n' % ("
    "os.environ['RANK_ID'], os.environ['DEVICE_ID'], os.environ['RANK_SIZE'], "
    "os.environ['DEVICE_NUM'], os.environ.get('MS_ROLE'), same))\n";

}  // namespace

TEST_CASE(
    "mindspore rank-table mode: the model zoo's ascend8p.sh and ascend4p.sh loops, re-enacted",
    "[integration][mindspore]") {
  TempDir dir;
  const std::string dev = eight_npus(dir);
  const std::string script = dir.write("contract.py", kLoopContract);
  const std::string data = source_dir() + "/tests/data/rank_table/";
  // ascend8p.sh: DEVICE_NUM=8 RANK_SIZE=8, DEVICE_ID=RANK_ID=i; ascend4p.sh: DEVICE_NUM=8
  // RANK_SIZE=4, DEVICE_ID=i+4, RANK_ID=i. The tables are hccl_tools.py's for those devices.
  struct Loop {
    const char* nproc;
    const char* devices;
    const char* table;
    int first_device;
  };
  for (const Loop& loop : {Loop{"8", "0-7", "hccl_8p_01234567_127.0.0.1.json", 0},
                           Loop{"4", "4-7", "hccl_4p_4567_127.0.0.1.json", 4}}) {
    NpuRunProcess p({"--framework", "mindspore", "--nproc-per-node", loop.nproc, "--devices",
                     loop.devices, "--rank-table", "auto", "--hccn-conf", data + "hccn.conf",
                     "--no-python", "/usr/bin/python3", script, data + loop.table},
                    {{"NPU_RUN_DEV_ROOT", dev}, {"MS_ROLE", "MS_WORKER"}});
    const Finished f = p.wait(60s);
    INFO(f.out << f.err);
    CHECK(f.exit_code == 0);
    const int size = std::stoi(loop.nproc);
    for (int i = 0; i < size; ++i) {
      CHECK_THAT(f.out, Contains(fmt::format("rank {} device {} size {} num 8 role None "
                                             "table-same True",
                                             i, i + loop.first_device, size)));
    }
    require_no_strays(p);
  }
}

TEST_CASE(
    "msrun --rank_table_file: MindSpore's rank-table mode, the model zoo's contract and no "
    "scheduler",
    "[integration][mindspore][msrun]") {
  TempDir dir;
  const std::string dev = eight_npus(dir);
  const std::string script = dir.write("contract.py", kLoopContract);
  const std::string table = source_dir() + "/tests/data/rank_table/hccl_8p_01234567_127.0.0.1.json";
  NpuRunProcess p(
      {"msrun", "--worker_num=8", "--local_worker_num=8", "--join=True",
       "--log_dir=" + dir.file("logs"), "--rank_table_file=" + table, "python3", script, table},
      {{"NPU_RUN_DEV_ROOT", dev}});
  const Finished f = p.wait(60s);
  INFO(f.out << f.err);
  CHECK(f.exit_code == 0);
  for (int i = 0; i < 8; ++i) {
    CHECK_THAT(f.out, Contains(fmt::format(
                          "rank {} device {} size 8 num 8 role None table-same True", i, i)));
  }
  CHECK_THAT(f.err, !Contains("scheduler"));
  require_no_strays(p);
}

}  // namespace test_mindspore
