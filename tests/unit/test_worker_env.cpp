#include <catch2/catch.hpp>

#include "agent/plan/worker_env.hpp"

namespace test_worker_env {

using namespace npu_run;

namespace {

LaunchConfig config(int nproc) {
  LaunchConfig cfg;
  cfg.shape.nproc_per_node = nproc;
  for (int i = 0; i < nproc; ++i) cfg.shape.devices.push_back(4 + i);
  cfg.rendezvous.run_id = "job7";
  cfg.worker.role = "trainer";
  cfg.supervision.max_restarts = 3;
  return cfg;
}

Assignment second_node_of_two() {
  Assignment a;
  a.node_rank = 1;
  a.nnodes = 2;
  a.world_size = 8;
  a.rank_offset = 4;
  a.worker_master_addr = "10.0.0.1";
  a.worker_master_port = 41234;
  return a;
}

}  // namespace

TEST_CASE("worker env: the whole contract for a worker on the second node", "[env]") {
  const EnvMap env =
      worker_contract_env(config(4), second_node_of_two(), WorkerSlot{2, 1, "/logs/e.json"}, {});
  const EnvMap expected{
      {"RANK", "6"},
      {"RANK_ID", "6"},
      {"LOCAL_RANK", "2"},
      {"WORLD_SIZE", "8"},
      {"RANK_SIZE", "8"},
      {"LOCAL_WORLD_SIZE", "4"},
      {"GROUP_RANK", "1"},
      {"GROUP_WORLD_SIZE", "2"},
      {"ROLE_RANK", "6"},
      {"ROLE_WORLD_SIZE", "8"},
      {"ROLE_NAME", "trainer"},
      {"DEVICE_ID", "6"},
      {"MASTER_ADDR", "10.0.0.1"},
      {"MASTER_PORT", "41234"},
      {"TORCHELASTIC_RESTART_COUNT", "1"},
      {"TORCHELASTIC_MAX_RESTARTS", "3"},
      {"TORCHELASTIC_RUN_ID", "job7"},
      {"TORCHELASTIC_USE_AGENT_STORE", "True"},  // --worker-store agent, the default
      {"TORCHELASTIC_ERROR_FILE", "/logs/e.json"},
      {"TORCH_NCCL_ASYNC_ERROR_HANDLING", "1"},
      {"NCCL_ASYNC_ERROR_HANDLING", "1"},  // the name torch < 2.2 reads
      {"OMP_NUM_THREADS", "1"},
  };
  CHECK(env == expected);
  LaunchConfig torch_store = config(4);
  torch_store.rendezvous.worker_store = WorkerStore::kTorch;  // rank 0 hosts torch's own store
  CHECK(worker_contract_env(torch_store, second_node_of_two(), WorkerSlot{2, 6, ""}, {})
            .at("TORCHELASTIC_USE_AGENT_STORE") == "False");
}

TEST_CASE("worker env: OMP_NUM_THREADS=1 only when unset and more than one worker", "[env]") {
  const Assignment a = second_node_of_two();
  CHECK(worker_contract_env(config(4), a, WorkerSlot{0, 0, ""}, {}).at("OMP_NUM_THREADS") == "1");
  CHECK(omp_threads_defaulted(config(4), {}));
  CHECK_FALSE(worker_contract_env(config(4), a, WorkerSlot{0, 0, ""}, {{"OMP_NUM_THREADS", "8"}})
                  .count("OMP_NUM_THREADS"));
  CHECK_FALSE(omp_threads_defaulted(config(4), {{"OMP_NUM_THREADS", "8"}}));
  Assignment single = a;
  single.world_size = 1;
  single.rank_offset = 0;
  CHECK_FALSE(
      worker_contract_env(config(1), single, WorkerSlot{0, 0, ""}, {}).count("OMP_NUM_THREADS"));
}

TEST_CASE("worker env: user settings are inherited, npu_run's contract wins over stale values",
          "[env]") {
  const EnvMap agent{{"PATH", "/bin"},
                     {"RANK", "99"},
                     {"TORCH_NCCL_ASYNC_ERROR_HANDLING", "0"},
                     {"NCCL_ASYNC_ERROR_HANDLING", "0"},
                     {"OMP_NUM_THREADS", "4"}};
  const EnvMap contract =
      worker_contract_env(config(4), second_node_of_two(), WorkerSlot{0, 0, ""}, agent);
  CHECK_FALSE(contract.count("TORCH_NCCL_ASYNC_ERROR_HANDLING"));
  CHECK_FALSE(contract.count("NCCL_ASYNC_ERROR_HANDLING"));
  CHECK_FALSE(contract.count("TORCHELASTIC_ERROR_FILE"));
  const EnvMap merged = merged_worker_env(config(4), agent, contract);
  CHECK(merged.at("PATH") == "/bin");
  CHECK(merged.at("RANK") == "4");
  CHECK(merged.at("TORCH_NCCL_ASYNC_ERROR_HANDLING") == "0");
  CHECK(merged.at("OMP_NUM_THREADS") == "4");
}

TEST_CASE("worker env: --virtual-local-rank shows each worker its own device at index 0", "[env]") {
  LaunchConfig cfg = config(4);
  cfg.shape.devices = {4, 5, 6, 7};
  cfg.worker.virtual_local_rank = true;
  cfg.worker.visible_devices_variable = "ASCEND_RT_VISIBLE_DEVICES";
  const EnvMap env = worker_contract_env(cfg, second_node_of_two(), WorkerSlot{2, 0, ""}, {});
  CHECK(env.at("LOCAL_RANK") == "0");
  CHECK(env.at("ASCEND_RT_VISIBLE_DEVICES") == "6");
  CHECK(env.at("RANK") == "6");                 // the global rank is untouched
  cfg.worker.visible_devices_variable.clear();  // a CPU job: nothing to narrow
  const EnvMap cpu = worker_contract_env(cfg, second_node_of_two(), WorkerSlot{2, 0, ""}, {});
  CHECK(cpu.at("LOCAL_RANK") == "0");
  CHECK_FALSE(cpu.count("CUDA_VISIBLE_DEVICES"));
  CHECK_FALSE(cpu.count("ASCEND_RT_VISIBLE_DEVICES"));
}

TEST_CASE("worker env: RANK_TABLE_FILE only when the job has a rank table", "[env]") {
  Assignment a = second_node_of_two();
  CHECK_FALSE(worker_contract_env(config(4), a, WorkerSlot{0, 0, ""}, {}).count("RANK_TABLE_FILE"));
  a.rank_table_file = "/run/job/rank_table.json";
  CHECK(worker_contract_env(config(4), a, WorkerSlot{0, 0, ""}, {}).at("RANK_TABLE_FILE") ==
        "/run/job/rank_table.json");
}

}  // namespace test_worker_env
