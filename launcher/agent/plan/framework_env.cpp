#include "agent/plan/framework_env.hpp"

#include <algorithm>
#include <cctype>
#include <chrono>

#include "basics/text.hpp"
#include "devices/device_discovery.hpp"

namespace npu_run {

namespace {

bool mindspore_dynamic(const LaunchConfig& cfg) {
  return cfg.worker.framework == Framework::kMindSpore && cfg.ascend.rank_table.index() == 0 &&
         !cfg.worker.ms_simulation;
}

bool tf_env_mode(const LaunchConfig& cfg) {
  return cfg.worker.framework == Framework::kTensorFlow && cfg.worker.tf_cluster == TfCluster::kEnv;
}

// What every process of a MindSpore dynamic cluster shares: where the scheduler listens (the
// port node 0's agent holds), how many workers register, how long they may take.
void add_mindspore_cluster(const LaunchConfig& cfg, const Assignment& a, EnvMap& env) {
  env["MS_SCHED_HOST"] = a.worker_master_addr;
  env["MS_SCHED_PORT"] = std::to_string(a.worker_master_port);
  env["MS_WORKER_NUM"] = std::to_string(a.world_size);
  const auto seconds =
      std::chrono::duration_cast<std::chrono::seconds>(cfg.rendezvous.timing.join_timeout);
  env["MS_TOPO_TIMEOUT"] = std::to_string(std::max<int64_t>(1, seconds.count()));
}

// DEVICE_NUM: the node's NPUs, as the model zoo's scripts export it (8 in ascend4p.sh too,
// which trains on 4 of a server's 8); the job's count on a node where none are found.
int node_device_count(const LaunchConfig& cfg, const EnvMap& agent_env) {
  const DiscoveredDevices found = discover_devices(agent_env);
  return found.kind == DeviceKind::kAscend ? static_cast<int>(found.physical_ids.size())
                                           : cfg.shape.nproc_per_node;
}

void add_mindspore(const LaunchConfig& cfg, const Assignment& a, int local_rank,
                   const EnvMap& agent_env, EnvMap& env) {
  if (const auto& sim = cfg.worker.ms_simulation) {
    // As msrun exports it for a dry run: the job simulated, no cluster to join.
    env["MS_SIMULATION_LEVEL"] = std::to_string(sim->level);
    env["MS_WORKER_NUM"] = std::to_string(sim->worker_num);
    env["RANK_SIZE"] = std::to_string(sim->worker_num);
    env["RANK_ID"] =
        std::to_string(sim->rank_id >= 0 ? sim->rank_id : sim->first_rank + local_rank);
    return;
  }
  if (!mindspore_dynamic(cfg)) {
    // Rank-table mode, as the model zoo's ascend8p.sh exports it.
    env["DEVICE_NUM"] = std::to_string(node_device_count(cfg, agent_env));
    return;
  }
  add_mindspore_cluster(cfg, a, env);
  env["MS_ROLE"] = "MS_WORKER";
  // The rank npu_run's rendezvous fixed: MindSpore need not guess it from host names.
  env["MS_NODE_ID"] = std::to_string(a.rank_offset + local_rank);
  env["MS_NODE_RANK"] = std::to_string(a.node_rank);
  if (cfg.rendezvous.local_addr) env["MS_WORKER_IP"] = *cfg.rendezvous.local_addr;
}

void add_tensorflow(const LaunchConfig& cfg, const Assignment& a, int local_rank,
                    const EnvMap& agent_env, EnvMap& env) {
  const int physical = cfg.shape.devices.at(local_rank);
  env["ASCEND_DEVICE_ID"] =
      std::to_string(cfg.worker.virtual_local_rank ? 0 : logical_device(physical, agent_env));
  if (!tf_env_mode(cfg)) {
    env["JOB_ID"] = tf_job_id(cfg.rendezvous.run_id);
    return;
  }
  // The adapter's environment-variable mode: HCCL numbers the ranks itself.
  for (const char* name : {"RANK_TABLE_FILE", "RANK_ID", "RANK_SIZE"}) env.erase(name);
  env["CM_CHIEF_IP"] = a.worker_master_addr;
  env["CM_CHIEF_PORT"] = std::to_string(a.worker_master_port);
  // The device node 0's first worker uses, as node 0 numbers it.
  int chief = cfg.shape.devices.front();
  for (const rdzv::PeerInfo& p : a.peers) {
    if (p.node_rank == 0 && !p.node.devices.empty()) chief = p.node.devices.front();
  }
  env["CM_CHIEF_DEVICE"] = std::to_string(logical_device(chief, agent_env));
  env["CM_WORKER_SIZE"] = std::to_string(a.world_size);
  std::string own = a.worker_master_addr;
  for (const rdzv::PeerInfo& p : a.peers) {
    if (p.node_rank == a.node_rank) own = p.node.addr;
  }
  if (cfg.rendezvous.local_addr) own = *cfg.rendezvous.local_addr;
  env["CM_WORKER_IP"] = own;
}

}  // namespace

void add_framework_env(const LaunchConfig& cfg, const Assignment& a, int local_rank,
                       const EnvMap& agent_env, EnvMap& env) {
  switch (cfg.worker.framework) {
    case Framework::kTorch:
      return;
    case Framework::kMindSpore:
      return add_mindspore(cfg, a, local_rank, agent_env, env);
    case Framework::kTensorFlow:
      return add_tensorflow(cfg, a, local_rank, agent_env, env);
  }
}

EnvMap scheduler_contract_env(const LaunchConfig& cfg, const Assignment& a, int restart_count) {
  EnvMap env{
      {"MS_ROLE", "MS_SCHED"},
      {"RANK_ID", "0"},
      {"RANK_SIZE", std::to_string(a.world_size)},
      {"TORCHELASTIC_RESTART_COUNT", std::to_string(restart_count)},
      {"TORCHELASTIC_RUN_ID", cfg.rendezvous.run_id},
  };
  add_mindspore_cluster(cfg, a, env);
  return env;
}

bool withheld_from_workers(const LaunchConfig& cfg, const std::string& name) {
  static const char* const kTorchNpuRun[] = {
      "ENABLE_TIERED_PARALLEL_TCPSTORE", "TORCH_NPU_ELASTIC_USE_AGENT_STORE",
      "TORCH_NPU_USE_PARALLEL_TCPSTORE", "PROXY_AGENT_PID_USE_LOCAL_SOCKET_PATH"};
  if (std::find(std::begin(kTorchNpuRun), std::end(kTorchNpuRun), name) != std::end(kTorchNpuRun))
    return true;
  const Framework framework = cfg.worker.framework;
  if (framework != Framework::kTorch && name.rfind("TORCH_NPU_", 0) == 0) return true;
  if (framework == Framework::kMindSpore) {
    // Set by npu_run in a dynamic cluster; in rank-table mode they would turn init() away from
    // the rank table (MindCluster's pods carry them: read as launch defaults, not passed on).
    for (const char* ms : {"MS_ROLE", "MS_SCHED_HOST", "MS_SCHED_PORT", "MS_WORKER_NUM",
                           "MS_LOCAL_WORKER", "MS_NODE_ID", "MS_NODE_RANK"}) {
      if (name == ms) return true;
    }
  }
  return false;
}

bool runs_mindspore_scheduler(const LaunchConfig& cfg, const Assignment& a) {
  return mindspore_dynamic(cfg) && a.node_rank == 0;
}

std::string tf_job_id(const std::string& run_id) {
  std::string id = run_id;
  for (char& c : id) {
    if (std::isalnum(static_cast<unsigned char>(c)) == 0 && c != '-' && c != '_') c = '_';
  }
  return id.empty() ? "npu_run" : id;
}

int logical_device(int physical, const EnvMap& agent_env) {
  const auto visible = lookup(agent_env, "ASCEND_RT_VISIBLE_DEVICES");
  if (!visible || visible->empty()) return physical;
  int index = 0;
  for (const std::string_view item : split(*visible, ',')) {
    if (trim(item) == std::to_string(physical)) return index;
    ++index;
  }
  return physical;
}

}  // namespace npu_run
