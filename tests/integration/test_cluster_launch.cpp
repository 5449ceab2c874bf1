// The binary inside scheduler environments: `npu_run hostnames`, the detected values logged once,
// and the refusals that must stop a job before any worker starts. (The real Slurm and mpirun
// runs are the e2e scripts; these pin the behaviour with the variables those set.)
#include <unistd.h>

#include <catch2/catch.hpp>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "support/harness.hpp"
#include "support/nodes.hpp"
#include "support/temp_dir.hpp"

namespace test_cluster_launch {

using namespace npu_run::testing;
using Catch::Matchers::Contains;

TEST_CASE("hostnames: prints one host per line like scontrol", "[integration][cluster]") {
  const Finished f = run_npu_run({"hostnames", "node[08-10],gpu[1,3]"});
  INFO(f.err);
  REQUIRE(f.exit_code == 0);
  CHECK(f.out == "node08\nnode09\nnode10\ngpu1\ngpu3\n");
  CHECK(f.err.empty());
}

TEST_CASE("hostnames: defaults to SLURM_JOB_NODELIST", "[integration][cluster]") {
  const Finished f = run_npu_run({"hostnames"}, {{"SLURM_JOB_NODELIST", "a[1-2]"}});
  INFO(f.err);
  REQUIRE(f.exit_code == 0);
  CHECK(f.out == "a1\na2\n");
}

TEST_CASE("hostnames: invalid input exits 2 with the reason and prints nothing",
          "[integration][cluster][usage]") {
  struct Case {
    std::vector<std::string> args;
    EnvOverrides env;
    std::string message;
  };
  const std::vector<Case> cases = {
      {{"hostnames", "node[3-1]"}, {}, "node[3-1]"},
      {{"hostnames", "node[1-3"}, {}, "node[1-3"},
      {{"hostnames", "a", "b"}, {}, "takes one expression"},
      {{"hostnames"}, {}, "SLURM_JOB_NODELIST"},
  };
  for (const Case& c : cases) {
    const Finished f = run_npu_run(c.args, c.env);
    INFO(c.args.back() << "\nstderr: " << f.err);
    CHECK(f.exit_code == 2);
    CHECK(f.out.empty());
    CHECK_THAT(f.err, Contains(c.message));
  }
}

TEST_CASE("slurm: the step's values are logged once and drive the plan", "[integration][cluster]") {
  const Finished f =
      run_npu_run({"--nproc-per-node", "2", "--dry-run", "--json", "--no-python", "/bin/true"},
                  slurm_step_env(1));
  INFO(f.err);
  REQUIRE(f.exit_code == 0);
  const auto plan = nlohmann::json::parse(f.out);
  CHECK(plan["world_size"] == 4);
  CHECK(plan["workers"][0]["env"]["RANK"] == "2");
  CHECK(plan["workers"][0]["env"]["GROUP_RANK"] == "1");
  CHECK(plan["workers"][0]["env"]["TORCHELASTIC_RUN_ID"] == "4242.0");
  CHECK_THAT(f.err, Contains("Slurm job 4242 step 0") && Contains("nnodes = 2") &&
                        Contains("node rank = 1") && Contains("master = n1") &&
                        Contains("master port = 24242"));
  // Once: a second mention would make logs of a 1000-node job unreadable.
  CHECK(f.err.find("Slurm job 4242") == f.err.rfind("Slurm job 4242"));
}

TEST_CASE("slurm: flags override what the step says", "[integration][cluster]") {
  const Finished f =
      run_npu_run({"--nnodes", "1", "--node-rank", "0", "--master-addr", "127.0.0.1",
                   "--master-port", "29999", "--dry-run", "--json", "--no-python", "/bin/true"},
                  slurm_step_env(1));
  INFO(f.err);
  REQUIRE(f.exit_code == 0);
  const auto plan = nlohmann::json::parse(f.out);
  CHECK(plan["workers"][0]["env"]["GROUP_RANK"] == "0");
  CHECK(plan["workers"][0]["env"]["WORLD_SIZE"] == "1");
  CHECK(plan["workers"][0]["env"]["MASTER_ADDR"] == "127.0.0.1");
  CHECK(plan["rendezvous"] == "127.0.0.1:29999");
}

TEST_CASE("slurm: two tasks per node exit 2 before any worker starts",
          "[integration][cluster][usage]") {
  TempDir dir;
  const std::string witness = dir.file("started");
  const Finished f =
      run_npu_run({"--nproc-per-node", "2", "--no-python", "/bin/sh", "-c", "touch " + witness},
                  slurm_step_env(0, 2));
  INFO(f.err);
  CHECK(f.exit_code == 2);
  CHECK_THAT(f.err, Contains("up to 2 tasks per node") && Contains("--ntasks-per-node=1"));
  CHECK_FALSE(std::filesystem::exists(witness));
}

TEST_CASE("cluster: --cluster none ignores the scheduler and a bad value is named",
          "[integration][cluster][usage]") {
  const Finished ignored =
      run_npu_run({"--cluster", "none", "--dry-run", "--json", "--no-python", "/bin/true"},
                  slurm_step_env(1, 2));
  INFO(ignored.err);
  REQUIRE(ignored.exit_code == 0);
  CHECK(nlohmann::json::parse(ignored.out)["world_size"] == 1);
  CHECK_THAT(ignored.err, !Contains("Slurm"));

  const Finished bad = run_npu_run({"--cluster", "pbs", "--no-python", "/bin/true"});
  CHECK(bad.exit_code == 2);
  CHECK_THAT(bad.err, Contains("pbs"));
}

TEST_CASE("mpi: two agents sharing a node are refused with the mpirun fix",
          "[integration][cluster][usage]") {
  const Finished f = run_npu_run({"--no-python", "/bin/true"},
                                 {{"OMPI_COMM_WORLD_SIZE", "4"},
                                  {"OMPI_COMM_WORLD_RANK", "1"},
                                  {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
                                  {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"},
                                  {"OMPI_MCA_orte_hnp_uri", "123.0;tcp://127.0.0.1:4000"}});
  INFO(f.err);
  CHECK(f.exit_code == 2);
  CHECK_THAT(f.err, Contains("ppr:1:node"));
}

TEST_CASE("slurm: the job stops when the process that started npu_run exits",
          "[integration][cluster]") {
  // srun's slurmstepd or mpirun dying without signalling its tasks would otherwise leave the
  // agent and its workers running as orphans. Here a shell starts npu_run in the background
  // with a one-node Slurm step's environment and exits once the worker runs.
  TempDir dir;
  const std::string log = dir.file("agent.log");
  const std::string marker = "parent-exit-" + std::to_string(getpid());
  std::string env_prefix = std::string("env ") + kMarkerVariable + "=" + marker +
                           " SLURM_JOB_ID=77 SLURM_STEP_ID=0 SLURM_JOB_NODELIST=localhost"
                           " SLURM_STEP_NODELIST=localhost SLURM_NNODES=1 SLURM_STEP_NUM_NODES=1"
                           " SLURM_NODEID=0 SLURM_PROCID=0 SLURM_LOCALID=0 SLURM_NTASKS=1"
                           " SLURM_TASKS_PER_NODE=1 SLURM_STEP_TASKS_PER_NODE=1";
  const std::string witness = dir.file("worker-started");
  const std::string command =
      env_prefix + " " + npu_run_binary() + " --log-level debug --master-port " +
      std::to_string(unused_port()) + " --no-python /bin/sh -c 'touch " + witness +
      "; exec sleep 1000' >/dev/null 2>" + log + " & for i in $(seq 100); do [ -e " + witness +
      " ] && break; sleep 0.05; done";
  REQUIRE(std::system(command.c_str()) == 0);  // std::system's /bin/sh is the parent
  REQUIRE(std::filesystem::exists(witness));
  const auto left = wait_until_no_marker_processes(marker, 10s);
  INFO(describe_processes(left));
  CHECK(left.empty());
  for (pid_t pid : left) kill(pid, SIGKILL);  // a failed test must not leak them either
  std::ifstream in(log);
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  INFO(text);
  CHECK_THAT(text, Contains("which started npu_run, exited without stopping it: stopping the "
                            "workers") &&
                       Contains("exit status 143"));
  // Before Linux 5.3 (the suite's second run) the watch is PR_SET_PDEATHSIG, not a pidfd.
  const bool has_pidfd = run_npu_run({"--version"}).out.find("pidfd_open yes") != std::string::npos;
  CHECK_THAT(text, Contains(has_pidfd ? "through pidfd" : "through PR_SET_PDEATHSIG"));
}

TEST_CASE("slurm: doctor checks the node count and master port the step will use",
          "[integration][cluster]") {
  const Finished f = run_npu_run({"doctor"}, slurm_step_env(1));
  INFO(f.out << f.err);
  CHECK_THAT(f.out, Contains("for a job of 2 nodes") && Contains("master port n1:24242") &&
                        Contains("checked by node 0; this is node 1"));
  const Finished flags = run_npu_run({"doctor", "--master-port", "29999"}, slurm_step_env(1));
  CHECK_THAT(flags.out, Contains("master port n1:29999"));
}

}  // namespace test_cluster_launch
