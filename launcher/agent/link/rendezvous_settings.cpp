#include "agent/link/rendezvous_settings.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>

#include "ascend/hccl_ports.hpp"
#include "basics/process_start.hpp"
#include "basics/usage_error.hpp"
#include "etcd/tls_context.hpp"
#include "rendezvous/protocol/protocol.hpp"

namespace npu_run {

std::string token_value(const RendezvousToken& token) {
  if (const auto* given = std::get_if<GivenToken>(&token)) return given->value;
  if (std::holds_alternative<DerivedToken>(token))
    throw std::logic_error("the Slurm step's rendezvous token was not derived before use");
  return "";
}

rdzv::JobSettings job_settings(const std::string& run_id, const std::string& token, int min_nodes,
                               int max_nodes, int max_restarts, const RendezvousTiming& timing) {
  rdzv::JobSettings s;
  s.run_id = run_id;
  // torchrun's default run id ("none") names no job: two jobs on one port would share it, so
  // their commands tell them apart. A run id of its own names the job by itself.
  s.check_command = run_id == LaunchConfig{}.rendezvous.run_id;
  s.token = token;
  s.min_nodes = min_nodes;
  s.max_nodes = max_nodes;
  s.max_restarts = max_restarts;
  s.heartbeat_interval = timing.heartbeat_interval;
  s.heartbeat_timeout = timing.heartbeat_timeout;
  s.join_timeout = timing.join_timeout;
  s.last_call = timing.last_call;
  return s;
}

rdzv::JobSettings job_settings(const LaunchConfig& cfg) {
  rdzv::JobSettings s =
      job_settings(cfg.rendezvous.run_id, token_value(cfg.rendezvous.token), cfg.shape.min_nodes,
                   cfg.shape.max_nodes, cfg.supervision.max_restarts, cfg.rendezvous.timing);
  s.command = job_command(cfg);
  s.max_no_progress_restarts = cfg.supervision.max_no_progress_restarts;
  s.strict_consistency = cfg.health.strict_consistency;
  s.preflight = cfg.health.preflight;
  s.straggler = cfg.supervision.straggler;
  s.spares = cfg.shape.spares;
  s.node_order = cfg.placement.order;
  s.sp_block = cfg.placement.sp_block;
  return s;
}

std::string job_command(const LaunchConfig& cfg) {
  const WorkerCommand& w = cfg.worker;
  std::string command = w.mode == WorkerMode::kPythonModule ? "-m " + w.entrypoint
                        : w.mode == WorkerMode::kExecutable ? "--no-python " + w.entrypoint
                                                            : w.entrypoint;
  for (const std::string& arg : w.args) command += " " + arg;
  // Cut the same way on every node, so that equal commands stay equal.
  if (command.size() > rdzv::Limits::kMaxText) command.resize(rdzv::Limits::kMaxText);
  return command;
}

rdzv::ServerOptions server_options(const std::string& bind_addr, int port,
                                   const RendezvousTiming& timing) {
  rdzv::ServerOptions o;
  o.bind_addr = bind_addr;
  o.port = port;
  o.backlog = timing.backlog;
  o.exit_barrier_timeout = timing.exit_barrier_timeout;
  o.handshake_timeout = timing.handshake_timeout;
  return o;
}

rdzv::ClientOptions client_options(const LaunchConfig& cfg) {
  rdzv::ClientOptions options;
  options.server_host = cfg.rendezvous.master_addr;
  options.server_port = cfg.rendezvous.master_port;
  options.connect_timeout = cfg.rendezvous.timing.join_timeout;
  options.hello = rdzv::Hello{rdzv::kMagic, rdzv::kProtocolVersion, cfg.rendezvous.run_id, ""};
  options.token = token_value(cfg.rendezvous.token);
  return options;
}

rdzv::NodeInfo this_node(const LaunchConfig& cfg, const std::string& host, const std::string& addr,
                         int worker_port) {
  rdzv::NodeInfo node;
  node.host = host;
  node.addr = addr;
  node.nproc = cfg.shape.nproc_per_node;
  node.devices = cfg.shape.devices;
  node.device_ips = cfg.ascend.device_ips();
  node.worker_port = worker_port;
  node.topology = cfg.placement.path;
  return node;
}

std::vector<PortRange> worker_ports_to_avoid(const EnvMap& env, int rendezvous_port) {
  return {hccl_ports(env), PortRange{rendezvous_port, rendezvous_port}};
}

std::optional<int> claimed_node_rank(const LaunchConfig& cfg) {
  const JobShape& shape = cfg.shape;
  // The scheduler's node rank (SLURM_NODEID) only numbers the allocation's nodes: where this
  // node's place is known, or --node-order asks for another order, it is no claim on a seat
  // (its node 0 still hosts the rendezvous). A spare's rank stays one: it names a spare.
  if (shape.node_rank_from_scheduler && shape.node_rank && *shape.node_rank < shape.max_nodes &&
      (cfg.placement.order != NodeOrder::kTopology || !cfg.placement.path.empty()))
    return std::nullopt;
  return shape.node_rank;
}

rdzv::Join join_message(const LaunchConfig& cfg, rdzv::NodeInfo node) {
  rdzv::Join join;
  join.node = std::move(node);
  join.node_rank = claimed_node_rank(cfg);
  join.min_nodes = cfg.shape.min_nodes;
  join.max_nodes = cfg.shape.max_nodes;
  join.max_restarts = cfg.supervision.max_restarts;
  join.want_peers = cfg.wants_peers();
  join.command = job_command(cfg);
  join.health = cfg.health.mode;
  join.spares = cfg.shape.spares;
  join.affinity = cfg.shape.spare_affinity;
  // A new leader knows this agent again by it (the pid: several agents may share a host).
  if (cfg.rendezvous.etcd) join.agent = fmt::format("{}-{}", join.node.host, ::getpid());
  join.started_ms = process_start_ms();
  return join;
}

etcd::Settings etcd_client_settings(const EtcdSettings& e) {
  etcd::Settings settings{etcd::parse_endpoints(e.endpoints), e.user, e.password, e.request_timeout,
                          nullptr};
  const bool tls = std::any_of(settings.endpoints.begin(), settings.endpoints.end(),
                               [](const etcd::Endpoint& member) { return member.tls; });
  if (!tls) return settings;
  try {
    settings.tls = etcd::make_tls_context({e.ca_file, e.cert_file, e.key_file});
  } catch (const std::runtime_error& error) {
    throw UsageError(
        fmt::format("--rdzv-conf: {}; give the PEM files etcd's own certificates "
                    "were made with (etcdctl's --cacert, --cert, --key)",
                    error.what()));
  }
  return settings;
}

}  // namespace npu_run
