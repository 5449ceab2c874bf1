// Cluster detection (Slurm, Open MPI, Kubernetes) and its precedence below flags and PET_.
#include <catch2/catch.hpp>
#include <utility>

#include "basics/usage_error.hpp"
#include "cli/parse_launch.hpp"
#include "cluster/cluster_env.hpp"
#include "support/temp_dir.hpp"

namespace test_cluster_env {

using namespace npu_run;
using Catch::Matchers::Contains;
using npu_run::testing::TempDir;

namespace {

// `npu_run ARGS SCRIPT` resolved with `env`; an early exit fails the test with its text.
ParsedLaunch parsed_launch(const EnvMap& env, const std::string& script,
                           std::vector<std::string> args) {
  args.push_back(script);
  ParseResult r = parse_command_line(args, env);
  if (auto* e = std::get_if<EarlyExit>(&r)) FAIL(e->text);
  return std::get<ParsedLaunch>(r);
}

// What srun gives the second task of `srun -N2 --ntasks-per-node=1` (recorded on a real Slurm).
EnvMap slurm_step(int node_id) {
  return {{"SLURM_JOB_ID", "4711"},
          {"SLURM_STEP_ID", "0"},
          {"SLURM_JOB_NODELIST", "n[1-2]"},
          {"SLURM_STEP_NODELIST", "n[1-2]"},
          {"SLURM_NNODES", "2"},
          {"SLURM_STEP_NUM_NODES", "2"},
          {"SLURM_STEP_NUM_TASKS", "2"},
          {"SLURM_NODEID", std::to_string(node_id)},
          {"SLURM_PROCID", std::to_string(node_id)},
          {"SLURM_LOCALID", "0"},
          {"SLURM_STEP_TASKS_PER_NODE", "1(x2)"}};
}

EnvMap mpirun(int rank, int size, int local_rank, int local_size) {
  return {{"OMPI_COMM_WORLD_SIZE", std::to_string(size)},
          {"OMPI_COMM_WORLD_RANK", std::to_string(rank)},
          {"OMPI_COMM_WORLD_LOCAL_RANK", std::to_string(local_rank)},
          {"OMPI_COMM_WORLD_LOCAL_SIZE", std::to_string(local_size)},
          {"OMPI_MCA_ess_base_jobid", "492503041"},
          {"OMPI_MCA_orte_hnp_uri", "492503040.0;tcp://10.1.2.3:52183;tcp6://[fd00::2]:47685"}};
}

}  // namespace

TEST_CASE("cluster: an srun step gives nnodes, node rank, master, run id and port", "[cluster]") {
  const ClusterDefaults d = detect_cluster(slurm_step(1), ClusterKind::kAuto, 1);
  CHECK(d.kind == ClusterKind::kSlurm);
  CHECK(d.facts.description == "Slurm job 4711 step 0");
  CHECK(d.nnodes == 2);
  CHECK(d.node_rank == 1);
  CHECK(d.master_addr == "n1");
  CHECK(d.run_id == "4711.0");
  CHECK(d.master_port == kDerivedPortBase + 4711);
  CHECK_THAT(d.facts.detected.at(0), Contains("SLURM_STEP_NUM_NODES"));
  CHECK(d.facts.warnings.empty());
}

TEST_CASE("cluster: a master port from the job id stays in its documented range", "[cluster]") {
  CHECK(port_for_job("0") == 20000);
  CHECK(port_for_job("12345") == 22345);
  CHECK(port_for_job("99999999") == 29999);
  const int hashed = port_for_job("not-a-number");
  CHECK(hashed >= kDerivedPortBase);
  CHECK(hashed < kDerivedPortBase + kDerivedPortCount);
  CHECK(port_for_job("not-a-number") == hashed);  // the same on every node
}

TEST_CASE("cluster: two srun tasks on one node are refused, with the fix", "[cluster]") {
  EnvMap env = slurm_step(0);
  env["SLURM_STEP_TASKS_PER_NODE"] = "2,1";
  CHECK_THROWS_WITH(detect_cluster(env, ClusterKind::kAuto, 1),
                    Contains("2 agents were started on one node") &&
                        Contains("srun --ntasks-per-node=1") &&
                        Contains("SLURM_STEP_TASKS_PER_NODE=2,1"));
  // Allowed on purpose: every agent is a node of the rendezvous, on its own slice of devices.
  env["SLURM_STEP_NUM_TASKS"] = "3";
  env["SLURM_PROCID"] = "1";
  env["SLURM_LOCALID"] = "1";
  const ClusterDefaults d = detect_cluster(env, ClusterKind::kAuto, 2);
  CHECK(d.nnodes == 3);
  CHECK(d.node_rank == 1);
  CHECK(d.agent_index == 1);
}

TEST_CASE("cluster: a multi-node batch script outside srun warns and runs on one node",
          "[cluster]") {
  const EnvMap env = {
      {"SLURM_JOB_ID", "9"}, {"SLURM_NNODES", "4"}, {"SLURM_JOB_NODELIST", "n[1-4]"}};
  const ClusterDefaults d = detect_cluster(env, ClusterKind::kAuto, 1);
  CHECK(d.kind == ClusterKind::kSlurm);
  CHECK_FALSE(d.nnodes);
  REQUIRE(d.facts.warnings.size() == 1);
  CHECK_THAT(d.facts.warnings[0],
             Contains("outside srun") && Contains("srun --ntasks-per-node=1 npu_run"));
}

TEST_CASE("cluster: mpirun gives size, rank and mpirun's host", "[cluster]") {
  const ClusterDefaults d = detect_cluster(mpirun(1, 4, 0, 1), ClusterKind::kAuto, 1);
  CHECK(d.kind == ClusterKind::kMpi);
  CHECK(d.nnodes == 4);
  CHECK(d.node_rank == 1);
  CHECK(d.master_addr == "10.1.2.3");
  CHECK(d.run_id == "mpi-492503041");
  CHECK_THROWS_WITH(
      detect_cluster(mpirun(1, 4, 1, 2), ClusterKind::kAuto, 1),
      Contains("mpirun started 2 processes on this node") && Contains("--map-by ppr:1:node"));
  CHECK(detect_cluster(mpirun(1, 2, 1, 2), ClusterKind::kAuto, 2).agent_index == 1);
}

TEST_CASE("cluster: a PyTorchJob pod gives world size, rank and master", "[cluster]") {
  const EnvMap pod = {{"KUBERNETES_SERVICE_HOST", "10.96.0.1"},
                      {"WORLD_SIZE", "3"},
                      {"RANK", "2"},
                      {"MASTER_ADDR", "job-master-0"},
                      {"MASTER_PORT", "23456"}};
  const ClusterDefaults d = detect_cluster(pod, ClusterKind::kAuto, 1);
  CHECK(d.kind == ClusterKind::kK8s);
  CHECK(d.nnodes == 3);
  CHECK(d.node_rank == 2);
  CHECK(d.master_addr == "job-master-0");
  CHECK(d.master_port == 23456);
  // Without Kubernetes around, RANK and WORLD_SIZE alone are not taken as a job.
  CHECK(detect_cluster({{"WORLD_SIZE", "3"}, {"RANK", "2"}}, ClusterKind::kAuto, 1).kind ==
        ClusterKind::kNone);
}

TEST_CASE("cluster: --cluster forces or disables detection", "[cluster]") {
  CHECK(detect_cluster(slurm_step(1), ClusterKind::kNone, 1).kind == ClusterKind::kNone);
  CHECK_THROWS_WITH(detect_cluster({}, ClusterKind::kSlurm, 1),
                    Contains("SLURM_JOB_ID is not set"));
  CHECK_THROWS_WITH(detect_cluster({}, ClusterKind::kMpi, 1),
                    Contains("start npu_run with mpirun"));
  CHECK_THROWS_WITH(detect_cluster({}, ClusterKind::kK8s, 1),
                    Contains("WORLD_SIZE and RANK are not set"));
  CHECK_THROWS_WITH(parse_cluster_kind("pbs", "--cluster"), Contains("--cluster 'pbs'"));
  EnvMap bad = slurm_step(0);
  bad["SLURM_NODEID"] = "x";
  CHECK_THROWS_WITH(detect_cluster(bad, ClusterKind::kAuto, 1),
                    Contains("SLURM_NODEID='x' is not a number"));
}

TEST_CASE("cluster: Slurm task counts per node", "[cluster]") {
  CHECK(parse_tasks_per_node("1(x2)", "v") == std::vector<int>{1, 1});
  CHECK(parse_tasks_per_node("2(x3),1", "v") == std::vector<int>{2, 2, 2, 1});
  CHECK(parse_tasks_per_node("4", "v") == std::vector<int>{4});
  CHECK_THROWS_WITH(parse_tasks_per_node("2(3)", "SLURM_TASKS_PER_NODE"),
                    Contains("SLURM_TASKS_PER_NODE='2(3)'"));
}

TEST_CASE("cluster precedence: flag > PET_ variable > launcher environment > default",
          "[cluster][cli]") {
  TempDir dir;
  const std::string script = dir.write("train.py", "");
  EnvMap env = slurm_step(1);
  env["PATH"] = "/usr/bin:/bin";
  env["PYTHON_EXEC"] = "/bin/sh";
  auto parse = [&](std::vector<std::string> args) {
    return parsed_launch(env, script, std::move(args));
  };
  ParsedLaunch p = parse({});
  LaunchConfig c = p.config;
  CHECK(c.shape.max_nodes == 2);
  CHECK(c.shape.node_rank == 1);
  CHECK(c.rendezvous.master_addr == "n1");
  CHECK(c.rendezvous.master_port == 24711);
  CHECK(c.rendezvous.run_id == "4711.0");
  CHECK(p.cluster.description == "Slurm job 4711 step 0");

  c = parse({"--nnodes", "3", "--node-rank", "2", "--master-addr", "10.0.0.9", "--master-port",
             "29400", "--run-id", "x"})
          .config;
  CHECK(c.shape.max_nodes == 3);
  CHECK(c.shape.node_rank == 2);
  CHECK(c.rendezvous.master_addr == "10.0.0.9");
  CHECK(c.rendezvous.master_port == 29400);
  CHECK(c.rendezvous.run_id == "x");
  {
    env.insert({{"PET_MASTER_PORT", "29555"}, {"PET_NNODES", "5"}});
    c = parse({}).config;
    CHECK(c.rendezvous.master_port == 29555);
    CHECK(c.shape.max_nodes == 5);
    CHECK(c.shape.node_rank == 1);  // still from Slurm
  }
  env.erase("PET_MASTER_PORT");
  env.erase("PET_NNODES");
  p = parse({"--cluster", "none"});
  c = p.config;
  CHECK(c.shape.max_nodes == 1);
  CHECK(c.rendezvous.master_port == 29500);
  CHECK(p.cluster.description.empty());

  // Agents sharing a node get their own devices unless --devices says otherwise.
  env = mpirun(1, 2, 1, 2);
  env["PATH"] = "/usr/bin:/bin";
  env["PYTHON_EXEC"] = "/bin/sh";
  c = parse({"--agents-per-node", "2", "--nproc-per-node", "4"}).config;
  CHECK(c.shape.devices == std::vector<int>{4, 5, 6, 7});
  c = parse({"--agents-per-node", "2", "--nproc-per-node", "2", "--devices", "0,1"}).config;
  CHECK(c.shape.devices == std::vector<int>{0, 1});
}

TEST_CASE("cluster: under Slurm the allocation's nodes beyond --nnodes are spares",
          "[cluster][spares]") {
  TempDir dir;
  const std::string script = dir.write("train.py", "");
  EnvMap env = slurm_step(1);
  env["PATH"] = "/usr/bin:/bin";
  env["PYTHON_EXEC"] = "/bin/sh";
  auto parse = [&](std::vector<std::string> args) {
    return parsed_launch(env, script, std::move(args)).config;
  };
  // Two nodes allocated, one asked for: node 1 waits as a spare (node rank 1 = the spare's).
  LaunchConfig c = parse({"--nnodes", "1"});
  CHECK(c.shape.max_nodes == 1);
  CHECK(c.shape.spares == 1);
  CHECK(c.shape.node_rank == 1);
  CHECK(c.shape.multi_node());
  CHECK(c.supervision.max_restarts == 0);
  // --spares given wins; without --nnodes the allocation is the job.
  CHECK(parse({"--nnodes", "1", "--spares", "3"}).shape.spares == 3);
  CHECK(parse({}).shape.spares == 0);
  // PET_SPARES and the affinity label.
  env["PET_SPARES"] = "2";
  env["PET_SPARE_AFFINITY"] = "rack7";
  c = parse({"--nnodes", "1"});
  CHECK(c.shape.spares == 2);
  CHECK(c.shape.spare_affinity == "rack7");
  // A SuperPoD named to HCCL is the label unless one is given.
  env["HCCL_LOGIC_SUPERPOD_ID"] = "3";
  CHECK(parse({"--nnodes", "1"}).shape.spare_affinity == "rack7");
  env.erase("PET_SPARE_AFFINITY");
  CHECK(parse({"--nnodes", "1"}).shape.spare_affinity == "superpod-3");
}

TEST_CASE("cluster: a MindCluster MindSpore pod's MS_* variables are the launch's defaults",
          "[cluster][framework]") {
  TempDir dir;
  const std::string script = dir.write("train.py", "");
  EnvMap env{{"PATH", "/usr/bin:/bin"}, {"PYTHON_EXEC", "/bin/sh"}, {"MS_SCHED_HOST", "10.0.0.1"},
             {"MS_SCHED_PORT", "8118"}, {"MS_WORKER_NUM", "16"},    {"MS_LOCAL_WORKER", "8"},
             {"MS_NODE_RANK", "1"}};
  auto parse = [&](std::vector<std::string> args) {
    return parsed_launch(env, script, std::move(args)).config;
  };
  LaunchConfig c = parse({});
  CHECK(c.shape.max_nodes == 2);
  CHECK(c.shape.node_rank == 1);
  CHECK(c.shape.nproc_per_node == 8);
  CHECK(c.rendezvous.master_addr == "10.0.0.1");
  CHECK(c.rendezvous.master_port == 8118);
  CHECK(c.worker.framework == Framework::kMindSpore);
  CHECK(c.rendezvous.worker_store == WorkerStore::kTorch);  // the scheduler's held port
  // Flags win.
  c = parse({"--nproc-per-node", "4", "--nnodes", "4", "--framework", "torch"});
  CHECK(c.shape.nproc_per_node == 4);
  CHECK(c.worker.framework == Framework::kTorch);
  // Counts that cannot be split evenly over the pods are named.
  env["MS_LOCAL_WORKER"] = "3";
  const ParseResult bad = parse_command_line({script}, env);
  const auto* e = std::get_if<EarlyExit>(&bad);
  REQUIRE(e != nullptr);
  CHECK_THAT(e->text, Contains("MS_WORKER_NUM=16 is not a multiple of MS_LOCAL_WORKER=3"));
}

}  // namespace test_cluster_env
