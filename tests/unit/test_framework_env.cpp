// Each framework's worker contract (agent/plan/framework_env.hpp), as ../shared/design/REFERENCE.md
// sections 9-11 describe what MindSpore, the TF Adapter and torch_npu read.
#include <catch2/catch.hpp>

#include "agent/plan/framework_env.hpp"
#include "agent/plan/worker_env.hpp"

namespace test_framework_env {

using namespace npu_run;

namespace {

LaunchConfig config(Framework framework) {
  LaunchConfig cfg;
  cfg.shape.nproc_per_node = 4;
  cfg.shape.devices = {4, 5, 6, 7};
  cfg.rendezvous.run_id = "job 7/a";
  cfg.rendezvous.timing.join_timeout = std::chrono::seconds(300);
  cfg.worker.framework = framework;
  return cfg;
}

// Node 1 of 2, four workers each; node 0 at 10.0.0.1 holds port 41234.
Assignment second_node() {
  Assignment a;
  a.node_rank = 1;
  a.nnodes = 2;
  a.world_size = 8;
  a.rank_offset = 4;
  a.worker_master_addr = "10.0.0.1";
  a.worker_master_port = 41234;
  return a;
}

EnvMap contract(const LaunchConfig& cfg, const Assignment& a, int local_rank,
                const EnvMap& agent = {}) {
  return worker_contract_env(cfg, a, WorkerSlot{local_rank, 0, ""}, agent);
}

}  // namespace

TEST_CASE("framework env: MindSpore's dynamic cluster, every worker of it", "[env][framework]") {
  LaunchConfig cfg = config(Framework::kMindSpore);
  cfg.rendezvous.local_addr = "10.0.0.2";
  const EnvMap env = contract(cfg, second_node(), 2);
  CHECK(env.at("MS_ROLE") == "MS_WORKER");
  CHECK(env.at("MS_SCHED_HOST") == "10.0.0.1");
  CHECK(env.at("MS_SCHED_PORT") == "41234");
  CHECK(env.at("MS_WORKER_NUM") == "8");
  CHECK(env.at("MS_NODE_ID") == "6");
  CHECK(env.at("RANK_ID") == "6");
  CHECK(env.at("MS_NODE_RANK") == "1");
  CHECK(env.at("MS_TOPO_TIMEOUT") == "300");
  CHECK(env.at("MS_WORKER_IP") == "10.0.0.2");
  CHECK(env.at("DEVICE_ID") == "6");  // physical
  CHECK(env.at("RANK_SIZE") == "8");
  CHECK_FALSE(env.count("DEVICE_NUM"));
  // The scheduler: same cluster, no device, rank 0, none of the workers' rank variables.
  const EnvMap sched = scheduler_contract_env(cfg, second_node(), 2);
  CHECK(sched.at("MS_ROLE") == "MS_SCHED");
  CHECK(sched.at("RANK_ID") == "0");
  CHECK(sched.at("MS_SCHED_PORT") == "41234");
  CHECK(sched.at("MS_WORKER_NUM") == "8");
  CHECK(sched.at("TORCHELASTIC_RESTART_COUNT") == "2");
  for (const char* none : {"DEVICE_ID", "RANK", "LOCAL_RANK", "MS_NODE_ID"})
    CHECK_FALSE(sched.count(none));
  CHECK(runs_mindspore_scheduler(cfg, Assignment{}));
  CHECK_FALSE(runs_mindspore_scheduler(cfg, second_node()));
}

TEST_CASE("framework env: MindSpore's dry run (msrun --sim_level) builds no cluster",
          "[env][framework]") {
  LaunchConfig cfg = config(Framework::kMindSpore);
  cfg.worker.ms_simulation = MindSporeSimulation{2, 13, 0, 16};
  const EnvMap env = contract(cfg, second_node(), 1);
  CHECK(env.at("MS_SIMULATION_LEVEL") == "2");
  CHECK(env.at("MS_WORKER_NUM") == "16");
  CHECK(env.at("RANK_SIZE") == "16");
  CHECK(env.at("RANK_ID") == "13");
  for (const char* cluster :
       {"MS_ROLE", "MS_SCHED_HOST", "MS_SCHED_PORT", "MS_TOPO_TIMEOUT", "MS_NODE_ID"})
    CHECK_FALSE(env.count(cluster));
  CHECK_FALSE(runs_mindspore_scheduler(cfg, Assignment{}));
}

TEST_CASE("framework env: MindSpore's rank-table mode is ascend8p.sh's contract",
          "[env][framework]") {
  LaunchConfig cfg = config(Framework::kMindSpore);
  cfg.ascend.rank_table = AutoRankTable{};
  Assignment a = second_node();
  a.rank_table_file = "/run/job/rank_table.json";
  const EnvMap env = contract(cfg, a, 3);
  CHECK(env.at("RANK_TABLE_FILE") == "/run/job/rank_table.json");
  CHECK(env.at("RANK_SIZE") == "8");
  CHECK(env.at("DEVICE_NUM") == "4");
  CHECK(env.at("DEVICE_ID") == "7");
  CHECK(env.at("RANK_ID") == "7");
  for (const char* none : {"MS_ROLE", "MS_SCHED_HOST", "MS_WORKER_NUM", "MS_NODE_ID"})
    CHECK_FALSE(env.count(none));
  CHECK_FALSE(runs_mindspore_scheduler(cfg, Assignment{}));
  // Inherited MindSpore cluster variables (a MindCluster pod's) would turn init() away from
  // the rank table: never passed on.
  const EnvMap merged = merged_worker_env(cfg, {{"MS_ROLE", "MS_WORKER"}, {"HOME", "/root"}}, env);
  CHECK_FALSE(merged.count("MS_ROLE"));
  CHECK(merged.at("HOME") == "/root");
}

TEST_CASE("framework env: the TF Adapter's rank table: JOB_ID and the logical device",
          "[env][framework]") {
  LaunchConfig cfg = config(Framework::kTensorFlow);
  cfg.ascend.rank_table = AutoRankTable{};
  Assignment a = second_node();
  a.rank_table_file = "/run/job/rank_table.json";
  EnvMap env = contract(cfg, a, 1);
  CHECK(env.at("JOB_ID") == "job_7_a");
  CHECK(env.at("RANK_ID") == "5");
  CHECK(env.at("DEVICE_ID") == "5");
  CHECK(env.at("ASCEND_DEVICE_ID") == "5");  // every device visible: logical = physical
  env = contract(cfg, a, 1, {{"ASCEND_RT_VISIBLE_DEVICES", "4, 5,6,7"}});
  CHECK(env.at("ASCEND_DEVICE_ID") == "1");  // its index among the visible ones
  CHECK(env.at("DEVICE_ID") == "5");
  CHECK(tf_job_id("") == "npu_run");
}

TEST_CASE("framework env: the TF Adapter's CM_* mode has no rank variables", "[env][framework]") {
  LaunchConfig cfg = config(Framework::kTensorFlow);
  cfg.worker.tf_cluster = TfCluster::kEnv;
  Assignment a = second_node();
  a.peers = {rdzv::PeerInfo{0, 0, rdzv::NodeInfo{"n0", "10.0.0.1", 4, {2, 3, 4, 5}, {}, 0}},
             rdzv::PeerInfo{1, 4, rdzv::NodeInfo{"n1", "10.0.0.2", 4, {4, 5, 6, 7}, {}, 0}}};
  const EnvMap env = contract(cfg, a, 0);
  CHECK(env.at("CM_CHIEF_IP") == "10.0.0.1");
  CHECK(env.at("CM_CHIEF_PORT") == "41234");
  CHECK(env.at("CM_CHIEF_DEVICE") == "2");  // node 0's first device
  CHECK(env.at("CM_WORKER_SIZE") == "8");
  CHECK(env.at("CM_WORKER_IP") == "10.0.0.2");  // this node's own
  CHECK(env.at("ASCEND_DEVICE_ID") == "4");
  for (const char* none : {"RANK_TABLE_FILE", "RANK_ID", "RANK_SIZE"}) CHECK_FALSE(env.count(none));
  CHECK(cfg.wants_peers());
}

TEST_CASE("framework env: torch_npu_run's switches never reach a worker", "[env][framework]") {
  const EnvMap agent{{"TORCH_NPU_USE_PARALLEL_TCPSTORE", "True"},
                     {"ENABLE_TIERED_PARALLEL_TCPSTORE", "1"},
                     {"TORCH_NPU_ELASTIC_USE_AGENT_STORE", "True"},
                     {"TORCH_NPU_OTHER", "x"}};
  const LaunchConfig torch = config(Framework::kTorch);
  EnvMap merged = merged_worker_env(torch, agent, {});
  CHECK(merged.size() == 1);  // torch keeps torch_npu's own settings
  CHECK(merged.at("TORCH_NPU_OTHER") == "x");
  merged = merged_worker_env(config(Framework::kMindSpore), agent, {});
  CHECK(merged.empty());  // MindSpore: nothing of torch_npu's
}

}  // namespace test_framework_env
