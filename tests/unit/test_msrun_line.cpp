// msrun's command line read into npu_run's (cli/msrun_line.hpp), as MindSpore's docs type it.
#include <algorithm>
#include <catch2/catch.hpp>

#include "basics/usage_error.hpp"
#include "cli/msrun_line.hpp"

namespace test_msrun_line {

using namespace npu_run;
using Catch::Matchers::Contains;

namespace {

bool npu_run_takes_value(const std::string& name) {
  return name == "--max-restarts" || name == "--log-dir";
}

std::string error_of(const std::vector<std::string>& args) {
  try {
    read_msrun_line(args, npu_run_takes_value, {});
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("msrun line: the docs' command, with npu_run's options mixed in", "[msrun]") {
  const MsrunLine l = read_msrun_line(
      {"--worker_num=8", "--local_worker_num=4", "--master_addr=10.0.0.1", "--master_port=8118",
       "--max-restarts", "3", "--node_rank=1", "--log_dir=msrun_log", "--join=True",
       "--cluster_time_out=300", "net.py", "--node_rank=7"},
      npu_run_takes_value, {});
  CHECK(l.join);
  CHECK(l.log_dir == "msrun_log");
  const std::vector<std::string> expected{
      "--framework",   "mindspore", "--nproc-per-node", "4",   "--nnodes",      "2",
      "--master-addr", "10.0.0.1",  "--rdzv-timeout",   "300", "--master-port", "8118",
      "--node-rank",   "1",         "--max-restarts",   "3",   "net.py",        "--node_rank=7"};
  CHECK(l.launch_args == expected);  // the script's own arguments are its own
}

TEST_CASE("msrun line: msrun's defaults, separate values, python and pytest", "[msrun]") {
  MsrunLine l = read_msrun_line({"--worker_num", "8", "train.py"}, npu_run_takes_value, {});
  CHECK_FALSE(l.join);  // msrun's default
  // One node: msrun's default port is npu_run's to choose (a free one).
  CHECK(l.launch_args == std::vector<std::string>{
                             "--framework", "mindspore", "--nproc-per-node", "8", "--nnodes", "1",
                             "--master-addr", "127.0.0.1", "--rdzv-timeout", "600", "train.py"});
  l = read_msrun_line({"--bind_core=True", "--rank_table_file=/r.json", "pytest", "-s", "t.py"},
                      npu_run_takes_value, {});
  CHECK(l.bind_core);  // the command places the workers (commands/msrun.cpp)
  const std::vector<std::string> tail(l.launch_args.end() - 6, l.launch_args.end());
  CHECK(tail ==
        std::vector<std::string>{"--rank-table", "/r.json", "--no-python", "pytest", "-s", "t.py"});
}

TEST_CASE("msrun line: mistakes are named with the fix", "[msrun]") {
  CHECK_THAT(error_of({"--worker_num=4", "--local_worker_num=8", "a.py"}),
             Contains("msrun --local_worker_num 8 is more than --worker_num 4"));
  CHECK_THAT(error_of({"--worker_num=10", "--local_worker_num=4", "a.py"}),
             Contains("--worker_num 10 is not a multiple of --local_worker_num 4"));
  CHECK_THAT(error_of({"--worker_num=8", "--local_worker_num=4", "--node_rank=2", "a.py"}),
             Contains("msrun --node_rank 2: node ranks run from 0 to 1"));
  CHECK_THAT(error_of({"--join=yes", "a.py"}),
             Contains("msrun --join 'yes': expected True or False"));
  CHECK_THAT(error_of({"--bind_core={\"device0\":[\"0-10\"]}", "a.py"}),
             Contains("npu_run splits the CPUs near each device itself"));
  CHECK_THAT(error_of({"--worker_num"}), Contains("msrun --worker_num needs a value"));
  CHECK_THAT(error_of({"--tail_worker_log=0,x", "a.py"}),
             Contains("give -1 (every worker) or ranks separated by commas"));
  CHECK_THAT(error_of({"--worker_num=4", "--local_worker_num=4", "--tail_worker_log=1,4", "a.py"}),
             Contains("rank 4 is not in the job (ranks 0 to 3 with --worker_num 4)"));
  CHECK_THAT(error_of({"--worker_num=4", "--local_worker_num=4", "--sim_level=1", "--sim_rank_id=4",
                       "a.py"}),
             Contains("msrun --sim_rank_id '4': expected a whole number from -1 to 3"));
  CHECK_THAT(error_of({"--worker_num=8"}), Contains("no training script given"));
}

TEST_CASE("msrun line: --tail_worker_log names the ranks on the console, -1 every one", "[msrun]") {
  MsrunLine l = read_msrun_line({"a.py"}, npu_run_takes_value, {});
  CHECK_FALSE(l.tail_ranks.has_value());
  l = read_msrun_line({"--tail_worker_log=0, 3", "--worker_log_name={ip}_{hostname}", "a.py"},
                      npu_run_takes_value, {});
  CHECK(l.tail_ranks == std::set<int>{0, 3});
  CHECK(l.worker_log_name == "{ip}_{hostname}");  // filled in on the node (commands/msrun.cpp)
}

TEST_CASE("msrun line: a dry run is one node, no cluster, as msrun runs it", "[msrun]") {
  // --sim_rank_id: one process as that rank of the whole job.
  MsrunLine l =
      read_msrun_line({"--worker_num=16", "--local_worker_num=8", "--node_rank=1",
                       "--master_addr=10.0.0.1", "--sim_level=1", "--sim_rank_id=5", "net.py"},
                      npu_run_takes_value, {});
  REQUIRE(l.simulation.has_value());
  CHECK(l.simulation->level == 1);
  CHECK(l.simulation->rank_id == 5);
  CHECK(l.simulation->worker_num == 16);
  CHECK(l.launch_args == std::vector<std::string>{"--framework", "mindspore", "--nproc-per-node",
                                                  "1", "--nnodes", "1", "--master-addr",
                                                  "127.0.0.1", "--rdzv-timeout", "600", "net.py"});
  // Without a rank: every local process, numbered from the node's first rank.
  l = read_msrun_line(
      {"--worker_num=16", "--local_worker_num=8", "--node_rank=1", "--sim_level=0", "net.py"},
      npu_run_takes_value, {});
  CHECK(l.simulation->rank_id == -1);
  CHECK(l.simulation->first_rank == 8);
  CHECK(l.launch_args[3] == "8");
  // msrun also takes MS_SIMULATION_LEVEL, RANK_SIZE and RANK_ID from the environment.
  l = read_msrun_line({"net.py"}, npu_run_takes_value,
                      {{"MS_SIMULATION_LEVEL", "2"}, {"RANK_SIZE", "64"}, {"RANK_ID", "33"}});
  CHECK(l.simulation->level == 2);
  CHECK(l.simulation->worker_num == 64);
  CHECK(l.simulation->rank_id == 33);
  CHECK_FALSE(
      read_msrun_line({"net.py"}, npu_run_takes_value, {{"RANK_ID", "3"}}).simulation.has_value());
}

TEST_CASE("msrun line: one node keeps a --master_port only when it was typed", "[msrun]") {
  const MsrunLine l =
      read_msrun_line({"--worker_num=4", "--local_worker_num=4", "--master_port=9000", "net.py"},
                      npu_run_takes_value, {});
  const auto& a = l.launch_args;
  const auto port = std::find(a.begin(), a.end(), "--master-port");
  REQUIRE(port != a.end());
  CHECK(*(port + 1) == "9000");
}

}  // namespace test_msrun_line
