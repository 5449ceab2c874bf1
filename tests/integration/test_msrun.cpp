// `npu_run msrun ...`: msrun's command lines as MindSpore's docs type them, run by npu_run.
// There is no MindSpore here: tests/tools/fake_mindspore.py keeps the contract of its
// scheduler and workers (see test_mindspore.cpp), so the files, the variables, the exit codes
// and the detached agent are checked against what msrun users rely on.
#include <fmt/format.h>
#include <sys/stat.h>

#include <catch2/catch.hpp>
#include <csignal>
#include <filesystem>
#include <regex>
#include <set>

#include "support/fixtures.hpp"
#include "support/harness.hpp"
#include "support/temp_dir.hpp"

namespace test_msrun {

using namespace npu_run::testing;
using Catch::Matchers::Contains;

namespace {

std::string fake_mindspore() {
  return source_dir() + "/tests/tools/fake_mindspore.py";
}

std::set<std::string> files_in(const std::string& dir) {
  std::set<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(dir))
    names.insert(entry.path().filename().string());
  return names;
}

// The pid the detached launch printed ("... agent pid 123 ...").
pid_t detached_pid(const std::string& out) {
  std::smatch m;
  REQUIRE(std::regex_search(out, m, std::regex("agent pid ([0-9]+)")));
  return static_cast<pid_t>(std::stoi(m[1]));
}

}  // namespace

TEST_CASE(
    "msrun: the docs' two-node command line, files named as msrun names them, every worker's "
    "id its rank",
    "[integration][msrun]") {
  TempDir work;
  auto node = [&](const char* rank) {
    // MindSpore's msrun_launcher.md, with this test's stand-in for net.py.
    return std::vector<std::string>{"msrun",
                                    "--worker_num=8",
                                    "--local_worker_num=4",
                                    "--master_addr=127.0.0.1",
                                    "--master_port=8118",
                                    std::string("--node_rank=") + rank,
                                    "--log_dir=msrun_log",
                                    "--join=True",
                                    "--cluster_time_out=300",
                                    fake_mindspore()};
  };
  NpuRunProcess n0(node("0"), {}, work.path());
  NpuRunProcess n1(node("1"), {}, work.path());
  const std::vector<Finished> f = NpuRunProcess::wait_all({&n0, &n1}, 120s);
  INFO(f[0].out << f[0].err << f[1].out << f[1].err);
  CHECK(f[0].exit_code == 0);
  CHECK(f[1].exit_code == 0);
  const std::string logs = work.path() + "/msrun_log";
  CHECK(files_in(logs) == std::set<std::string>{"scheduler.log", "worker_0.log", "worker_1.log",
                                                "worker_2.log", "worker_3.log", "worker_4.log",
                                                "worker_5.log", "worker_6.log", "worker_7.log"});
  struct stat info {};
  REQUIRE(::stat(logs.c_str(), &info) == 0);
  CHECK((info.st_mode & 0777) == 0700);  // as msrun makes it
  for (int rank = 0; rank < 8; ++rank) {
    const std::string text = read_file(fmt::format("{}/worker_{}.log", logs, rank));
    CHECK_THAT(text, Contains(fmt::format("worker {} of 8 runs MS_ROLE=MS_WORKER", rank)));
    CHECK_THAT(text, Contains(fmt::format("MS_TOPO_TIMEOUT=300 RANK_ID={}", rank)));
  }
  CHECK_THAT(read_file(logs + "/scheduler.log"),
             Contains("all 8 workers registered with ids [0, 1, 2, 3, 4, 5, 6, 7]") &&
                 Contains("cluster finished"));
  // The console shows every worker (--tail_worker_log -1), never the scheduler.
  CHECK_THAT(f[1].out, Contains("worker 5 of 8 runs") && !Contains("scheduler up"));
  require_no_strays(n0);
  require_no_strays(n1);
}

TEST_CASE(
    "msrun: a failing worker's own exit code, --tail_worker_log, and a restart that adds to the "
    "files",
    "[integration][msrun]") {
  TempDir work;
  Finished f =
      run_npu_run({"msrun", "--worker_num=4", "--local_worker_num=4", "--join=True",
                   "--log_dir=logs", "--tail_worker_log=0,1", fake_mindspore()},
                  // Every worker prints its line before rank 2 fails, a second later.
                  {{"FAKE_MS_FAIL", "2"}, {"FAKE_MS_TRAIN_SECONDS", "1"}}, 60s, work.path());
  INFO(f.out << f.err);
  CHECK(f.exit_code == 7);  // msrun exits 1 whatever failed
  CHECK_THAT(f.err, Contains("exit code 7") && Contains("log: logs/worker_2.log"));
  CHECK_THAT(f.out, Contains("worker 0 of 4 runs") && Contains("worker 1 of 4 runs"));
  CHECK_THAT(f.out, !Contains("worker 3 of 4 runs") && !Contains("failing on purpose"));
  CHECK_THAT(read_file(work.path() + "/logs/worker_2.log"), Contains("failing on purpose"));

  NpuRunProcess p({"msrun", "--worker_num=4", "--local_worker_num=4", "--join=True",
                   "--log_dir=logs", "--max-restarts", "1", fake_mindspore()},
                  {{"FAKE_MS_FAIL", "2"}}, work.path());
  f = p.wait(60s);
  INFO(f.out << f.err);
  CHECK(f.exit_code == 0);
  // The first attempt's lines stay; the restart's follow them.
  const std::string rank2 = read_file(work.path() + "/logs/worker_2.log");
  CHECK(count_occurrences(rank2, "failing on purpose") == 1);
  CHECK(rank2.find("TORCHELASTIC_RESTART_COUNT=0") < rank2.find("TORCHELASTIC_RESTART_COUNT=1"));
  const std::string scheduler = read_file(work.path() + "/logs/scheduler.log");
  CHECK_THAT(scheduler, Contains("(attempt 0)") && Contains("(attempt 1)"));
  require_no_strays(p);
}

TEST_CASE("msrun: --worker_log_name fills in {ip} and {hostname}", "[integration][msrun]") {
  TempDir work;
  const Finished f = run_npu_run(
      {"msrun", "--worker_num=2", "--local_worker_num=2", "--master_addr=127.0.0.1", "--join=True",
       "--log_dir=renamed", "--worker_log_name={ip}_{hostname}", fake_mindspore()},
      {{kHostNameVariable, "msrun-host"}}, 60s, work.path());
  INFO(f.out << f.err);
  CHECK(f.exit_code == 0);
  CHECK(files_in(work.path() + "/renamed") == std::set<std::string>{"127.0.0.1_msrun-host_0.log",
                                                                    "127.0.0.1_msrun-host_1.log",
                                                                    "scheduler.log"});
}

TEST_CASE("msrun: --sim_level and --sim_rank_id run one process as that rank, no scheduler",
          "[integration][msrun]") {
  TempDir work;
  const Finished f = run_npu_run(
      {"msrun", "--worker_num=8", "--local_worker_num=8", "--master_addr=10.0.0.1", "--join=True",
       "--log_dir=dry", "--sim_level=1", "--sim_rank_id=5", fake_mindspore()},
      {}, 60s, work.path());
  INFO(f.out << f.err);
  CHECK(f.exit_code == 0);
  CHECK(files_in(work.path() + "/dry") == std::set<std::string>{"worker_5.log"});
  const std::string text = read_file(work.path() + "/dry/worker_5.log");
  CHECK_THAT(text, Contains("simulating rank 5 of 8 at level 1"));
  CHECK_THAT(text, Contains("MS_ROLE=None MS_SCHED_HOST=None") && Contains("RANK_SIZE=8"));
}

TEST_CASE("msrun: --bind_core True gives each worker a share of the CPUs of its own",
          "[integration][msrun]") {
  TempDir work;
  // msrun runs `python3 -c ...` as it is (no python prepended); so does the scheduler.
  const Finished f =
      run_npu_run({"msrun", "--worker_num=2", "--local_worker_num=2", "--join=True",
                   "--log_dir=cores", "--bind_core=True", "python3", "-c",
                   "import os; print('cpus', ','.join(map(str, sorted(os.sched_getaffinity(0)))))"},
                  {}, 60s, work.path());
  INFO(f.out << f.err);
  CHECK(f.exit_code == 0);
  std::set<std::string> shares;
  for (int rank = 0; rank < 2; ++rank) {
    std::smatch m;
    const std::string text = read_file(fmt::format("{}/cores/worker_{}.log", work.path(), rank));
    REQUIRE(std::regex_search(text, m, std::regex("cpus ([0-9,]+)")));
    shares.insert(m[1]);
  }
  CHECK(shares.size() == 2);  // different shares (one CPU each on this 2-CPU machine)
}

TEST_CASE(
    "msrun: --join False returns at once, the detached agent supervises the job to its end, "
    "npu_run status shows it",
    "[integration][msrun]") {
  TempDir work;
  NpuRunProcess p(
      {"msrun", "--worker_num=2", "--local_worker_num=2", "--log_dir=bg", fake_mindspore()},
      {{"FAKE_MS_TRAIN_SECONDS", "4"}}, work.path());
  const Finished f = p.wait(20s);
  INFO(f.out << f.err);
  CHECK(f.exit_code == 0);
  CHECK(f.seconds < 3);  // the job trains 4 s; the command does not wait for it
  CHECK_THAT(f.out, Contains("npu_run status --pid") && Contains("bg/scheduler.log"));
  const pid_t agent = detached_pid(f.out);
  const Finished status = run_npu_run({"status", "--pid", std::to_string(agent)});
  INFO(status.out << status.err);
  CHECK(status.exit_code == 0);
  CHECK_THAT(status.out, Contains("ranks 0-1") && Contains("running"));
  // The job ends by itself; nothing of it is left.
  const std::vector<pid_t> left = wait_until_no_marker_processes(p.marker(), 60s);
  CHECK(left.empty());
  const std::string agent_log = fmt::format("{}/bg/npu_run_{}.log", work.path(), agent);
  CHECK_THAT(read_file(agent_log), Contains("all 2 workers and MindSpore's scheduler exited 0"));
  CHECK_THAT(read_file(work.path() + "/bg/worker_1.log"), Contains("worker 1 of 2 runs"));
}

TEST_CASE("msrun: a detached job stopped by npu_run status --stop, or its agent SIGKILLed",
          "[integration][msrun]") {
  TempDir work;
  for (const bool kill_agent : {false, true}) {
    NpuRunProcess p(
        {"msrun", "--worker_num=2", "--local_worker_num=2", "--log_dir=bg", fake_mindspore()},
        {{"FAKE_MS_TRAIN_SECONDS", "300"}}, work.path());
    const Finished f = p.wait(20s);
    INFO(f.out << f.err);
    REQUIRE(f.exit_code == 0);
    const pid_t agent = detached_pid(f.out);
    REQUIRE(wait_for_marker_processes(p.marker(), 5, 30s) >= 5);  // agent, guardian, 3 python
    if (kill_agent) {
      ::kill(agent, SIGKILL);  // the guardian stops what it leaves
    } else {
      const Finished stop = run_npu_run({"status", "--stop", "--pid", std::to_string(agent)});
      INFO(stop.out << stop.err);
      CHECK(stop.exit_code == 0);
      CHECK_THAT(stop.out, Contains(fmt::format("the agent pid {} stopped its job", agent)));
    }
    const std::vector<pid_t> left = wait_until_no_marker_processes(p.marker(), 30s);
    CHECK(left.empty());
  }
}

}  // namespace test_msrun
