#include "agent/plan/worker_env.hpp"

#include "agent/plan/framework_env.hpp"
#include "basics/token_file.hpp"

namespace npu_run {

bool omp_threads_defaulted(const LaunchConfig& cfg, const EnvMap& agent_env) {
  return cfg.shape.nproc_per_node > 1 && !agent_env.count("OMP_NUM_THREADS");
}

EnvMap worker_contract_env(const LaunchConfig& cfg, const Assignment& a, const WorkerSlot& slot,
                           const EnvMap& agent_env) {
  const int rank = a.rank_offset + slot.local_rank;
  const std::string world = std::to_string(a.world_size);
  EnvMap env{
      {"RANK", std::to_string(rank)},
      {"RANK_ID", std::to_string(rank)},  // Ascend's name for the global rank
      {"LOCAL_RANK", std::to_string(slot.local_rank)},
      {"WORLD_SIZE", world},
      {"RANK_SIZE", world},
      {"LOCAL_WORLD_SIZE", std::to_string(cfg.shape.nproc_per_node)},
      {"GROUP_RANK", std::to_string(a.node_rank)},
      {"GROUP_WORLD_SIZE", std::to_string(a.nnodes)},
      // One role per job, so role ranks are the global ranks (as torchrun with a single role).
      {"ROLE_RANK", std::to_string(rank)},
      {"ROLE_WORLD_SIZE", world},
      {"ROLE_NAME", cfg.worker.role},
      {"DEVICE_ID", std::to_string(cfg.shape.devices.at(slot.local_rank))},
      {"MASTER_ADDR", a.worker_master_addr},
      {"MASTER_PORT", std::to_string(a.worker_master_port)},
      {"TORCHELASTIC_RESTART_COUNT", std::to_string(slot.restart_count)},
      {"TORCHELASTIC_MAX_RESTARTS", std::to_string(cfg.supervision.max_restarts)},
      {"TORCHELASTIC_RUN_ID", cfg.rendezvous.run_id},
      // "True": every rank is a client of the store npu_run serves (torch 1.13 then prefixes its
      // keys with /worker/attempt_<n>); "False": rank 0 hosts torch's own store.
      {"TORCHELASTIC_USE_AGENT_STORE",
       npu_run_serves_store(cfg.rendezvous.worker_store) ? "True" : "False"},
  };
  if (cfg.worker.virtual_local_rank) {
    // Each worker sees only its own device, at index 0 (torchrun 2.x --virtual-local-rank).
    env["LOCAL_RANK"] = "0";
    if (!cfg.worker.visible_devices_variable.empty())
      env[cfg.worker.visible_devices_variable] =
          std::to_string(cfg.shape.devices.at(slot.local_rank));
  }
  if (!slot.error_file.empty()) env["TORCHELASTIC_ERROR_FILE"] = slot.error_file;
  if (!a.rank_table_file.empty()) env["RANK_TABLE_FILE"] = a.rank_table_file;
  // --sp-block: the logical SuperPoD the rendezvous cut for this node
  // (rendezvous/state/node_order.hpp).
  if (!a.block.empty()) env["HCCL_LOGIC_SUPERPOD_ID"] = a.block;
  // Both names, as torchrun sets them: torch < 2.2 reads only the old one.
  for (const char* name : {"TORCH_NCCL_ASYNC_ERROR_HANDLING", "NCCL_ASYNC_ERROR_HANDLING"}) {
    if (!agent_env.count(name)) env[name] = "1";
  }
  if (omp_threads_defaulted(cfg, agent_env)) env["OMP_NUM_THREADS"] = "1";
  // Gloo, NCCL and HCCL advertise the address of the host name or the first interface, which
  // peers may not reach (multi-NIC hosts, a host name that resolves to 127.0.0.1): name the
  // interface peers reach this node on, unless the user chose one.
  if (!a.socket_ifname.empty()) {
    for (const char* name : {"GLOO_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME", "HCCL_SOCKET_IFNAME"}) {
      if (!agent_env.count(name)) env[name] = a.socket_ifname;
    }
  }
  // With a rank table HCCL sets up every link at once; torch_npu advises at least 300 s there,
  // and every node must wait as long as the others.
  if (cfg.ascend.rank_table.index() != 0 && !agent_env.count("HCCL_CONNECT_TIMEOUT"))
    env["HCCL_CONNECT_TIMEOUT"] = "300";
  add_framework_env(cfg, a, slot.local_rank, agent_env, env);
  return env;
}

EnvMap merged_worker_env(const LaunchConfig& cfg, const EnvMap& agent_env, const EnvMap& contract) {
  EnvMap env = agent_env;
  // The rendezvous token is the agents' secret: a worker (and anyone reading its
  // /proc/PID/environ or `ps e`) must not see it.
  env.erase(kTokenVariable);
  for (auto it = env.begin(); it != env.end();)
    it = withheld_from_workers(cfg, it->first) ? env.erase(it) : std::next(it);
  for (const auto& [name, value] : contract) env[name] = value;
  return env;
}

}  // namespace npu_run
