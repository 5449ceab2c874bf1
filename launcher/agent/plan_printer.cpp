#include "agent/plan_printer.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <nlohmann/json.hpp>

#include "agent/link/rendezvous_settings.hpp"
#include "agent/plan/plan_supervision.hpp"
#include "agent/plan/worker_plan.hpp"
#include "agent/records/job_records.hpp"
#include "agent/records/run_directory.hpp"
#include "agent/rooms/agent_rooms.hpp"
#include "basics/enum_table.hpp"
#include "devices/device_list.hpp"
#include "etcd/member_probe.hpp"
#include "net/host_address.hpp"
#include "rendezvous/state/node_order.hpp"
#include "workers/agent_directory.hpp"
#include "workers/escaped_processes.hpp"

namespace npu_run {
namespace {

constexpr EnumTable<StreamSink, 4> kSinkNames({{{StreamSink::kInherit, "console"},
                                                {StreamSink::kFile, "file"},
                                                {StreamSink::kRelay, "relay"},
                                                {StreamSink::kDiscard, "discarded"}}});

// What npu_run does with one stream, as the run does it: "console", "console, each line
// prefixed '[default0]:'", "file F", "console+file F", "discarded", and what else it keeps.
std::string describe_route(const StreamRoute& route, const std::string& prefix) {
  std::string text;
  if (route.sink == StreamSink::kRelay) {
    text = route.to_console ? "console" : "";
    if (route.to_console && route.prefixed && !prefix.empty())
      text += fmt::format(", each line prefixed '{}'", prefix);
    if (!route.file.empty()) text += (text.empty() ? "file " : ", and file ") + route.file;
    if (text.empty()) text = "discarded";
    text += " (through npu_run";
    if (!route.filters.empty())
      text += fmt::format("; lines with '{}' also to {}", fmt::join(route.filters, "', '"),
                          route.filtered_file);
    text += ")";
  } else {
    text = kSinkNames.name(route.sink);
    if (!route.file.empty()) text += " " + route.file;
  }
  // The evidence of a failure: its last lines, read when the worker has ended.
  if (route.keep_tail) text += "; its tail read for a failure's summary";
  return text;
}

// The mark as the dry run shows it: the agent's pid and 16 random hex digits, made at launch.
constexpr const char* kAgentMarkTemplate = "<pid>-<16 hex digits>";

// MASTER_PORT, and MindSpore's and the TF Adapter's names for the same port node 0 holds.
bool is_held_port(const std::string& name) {
  return name == "MASTER_PORT" || name == "MS_SCHED_PORT" || name == "CM_CHIEF_PORT";
}

// The held port is only known once the agent holds it.
std::string env_value(const std::string& name, const std::string& value, const Assignment& a) {
  if (is_held_port(name) && a.worker_master_port == 0)
    return "<held by the agent, chosen at launch>";
  return value;
}

std::vector<std::string> command_of(const WorkerSpec& spec) {
  std::vector<std::string> command{spec.program};
  command.insert(command.end(), spec.argv.begin(), spec.argv.end());
  return command;
}

// "gate (auto: a health tool was found)", "off", ...
std::string health_mode_text(const HealthGateSettings& health) {
  const std::string mode(kHealthModeNames.name(health.mode));
  if (health.mode_chosen) return mode;
  return fmt::format("{} (auto: {})", mode,
                     health.mode == HealthMode::kGate ? "a health tool or --health-check-cmd exists"
                                                      : "no health tool here");
}

}  // namespace

// One worker (or the scheduler) of the plan: command, placement, contract, streams.
std::string format_spec_text(const WorkerSpec& spec, const Assignment& a) {
  std::string out;
  if (spec.local_rank < 0) {
    out += "\nMindSpore's scheduler (node 0 only; started first, stopped last)\n";
  } else {
    out += fmt::format("\nlocal rank {} -> rank {}, device {}\n", spec.local_rank, spec.global_rank,
                       spec.device_id);
  }
  std::string command;
  for (const auto& part : command_of(spec))
    command += (command.empty() ? "" : " ") + shell_quote(part);
  out += "  command: " + command + "\n";
  if (!spec.cpus.empty()) {
    out += spec.numa_node >= 0 ? fmt::format("  numa: CPUs {}, memory preferred from node {}\n",
                                             format_device_list(spec.cpus), spec.numa_node)
                               : fmt::format("  cpus: {} (no memory node preferred)\n",
                                             format_device_list(spec.cpus));
  }
  out += "  env (set by npu_run; everything else is inherited):\n";
  for (const auto& [name, value] : spec.contract_env)
    out += fmt::format("    {}={}\n", name, env_value(name, value, a));
  out += fmt::format("  stdout: {}\n  stderr: {}\n", describe_route(spec.out, spec.console_prefix),
                     describe_route(spec.err, spec.console_prefix));
  return out;
}

namespace {

// How long the plan waits for etcd's members to say whether they answer.
constexpr std::chrono::milliseconds kEtcdProbeTimeout{2000};

// Where the rendezvous is: node 0's address, or the leader etcd elects (never the password),
// and whether etcd's members answer.
std::string rendezvous_text(const LaunchConfig& cfg) {
  const auto& etcd = cfg.rendezvous.etcd;
  if (!etcd) return fmt::format("{}:{}", cfg.rendezvous.master_addr, cfg.rendezvous.master_port);
  std::string text =
      fmt::format("the agent etcd at {} elects (keys under {}, lease {:.0f} s", etcd->endpoints,
                  etcd->prefix, std::chrono::duration<double>(etcd->lease_ttl).count());
  if (!etcd->user.empty())
    text += fmt::format(", user {} with the password from {}", etcd->user, etcd->password_source);
  if (etcd->endpoints.find("https://") != std::string::npos) {
    text += fmt::format(", TLS checked against {}",
                        etcd->ca_file.empty() ? "the system's CA store" : etcd->ca_file);
    if (!etcd->cert_file.empty()) text += fmt::format(", client certificate {}", etcd->cert_file);
  }
  // Asked now, so that a wrong endpoint shows before the job relies on it.
  const auto probes = etcd::probe_members(etcd_client_settings(*etcd), kEtcdProbeTimeout);
  return text + "); etcd members: " + etcd::describe_probes(probes);
}

// Where node 0 leaves the job's records, and where this agent serves its metrics.
std::string records_text(const LaunchConfig& cfg, const std::string& run_dir) {
  const JobRecordPaths paths = job_record_paths(cfg, run_dir);
  std::string text = paths.timeline.empty() ? "no timeline (give --log-dir or --timeline)"
                                            : "timeline " + paths.timeline + " (node 0)";
  if (!paths.report.empty()) text += ", report " + paths.report;
  text += cfg.records.metrics_port == 0
              ? ", no metrics"
              : fmt::format(", metrics at http://{}:{}/metrics", cfg.records.metrics_addr,
                            cfg.records.metrics_port);
  return text;
}

}  // namespace

namespace {

// "placement: nodes in topology order; this node: superpod 1 / switch leaf3 (npu-smi, lldp)".
std::string placement_text(const LaunchConfig& cfg) {
  const Placement& p = cfg.placement;
  std::string text = fmt::format("placement: nodes in {} order; this node: {}",
                                 rdzv::node_order_name(p.order), p.path.describe());
  if (p.sp_block > 0) text += fmt::format("; logical SuperPoDs of {} devices", p.sp_block);
  return text;
}

}  // namespace

std::string format_plan_text(const LaunchConfig& cfg, const Assignment& a,
                             const std::vector<WorkerSpec>& specs, const std::string& run_dir) {
  std::string out = "npu_run dry run: the plan below is resolved; nothing is started.\n";
  out += fmt::format(
      "job: {} node{}, {} worker{} per node, world size {}, run id '{}', role '{}', max restarts "
      "{}\n",
      a.nnodes, a.nnodes == 1 ? "" : "s", cfg.shape.nproc_per_node,
      cfg.shape.nproc_per_node == 1 ? "" : "s", a.world_size, cfg.rendezvous.run_id,
      cfg.worker.role, cfg.supervision.max_restarts);
  out += fmt::format("node {} ({}): ranks {}-{}, devices {} ({})\n", a.node_rank, a.host,
                     a.rank_offset, a.rank_offset + cfg.shape.nproc_per_node - 1,
                     format_device_list(cfg.shape.devices), cfg.shape.devices_source);
  out += fmt::format("workers' store: MASTER_ADDR={} MASTER_PORT={}\n", a.worker_master_addr,
                     env_value("MASTER_PORT", std::to_string(a.worker_master_port), a));
  if (a.nnodes > 1) {
    out += fmt::format(
        "rendezvous: {}; node rank, rank offset and the workers' store are assigned there. "
        "Shown here "
        "assuming node rank {} and {} workers on every node.\n",
        rendezvous_text(cfg), a.node_rank, cfg.shape.nproc_per_node);
    out += placement_text(cfg) + "\n";
    // Where the token comes from; the token itself is never printed.
    out += fmt::format("rendezvous token: {}\n", token_source(cfg.rendezvous.token).empty()
                                                     ? "none"
                                                     : token_source(cfg.rendezvous.token));
  }
  out += fmt::format("files: {}{}\n", run_dir,
                     cfg.output.log_dir || cfg.output.log_dir_is_temporary
                         ? ""
                         : " (error files only, removed at exit)");
  out += "records: " + records_text(cfg, run_dir) + "\n";
  out += fmt::format("stop: forward the signal, SIGKILL after {:.1f} s\n",
                     std::chrono::duration<double>(cfg.supervision.term_timeout).count());
  out += supervision_text(cfg.supervision);
  out += cfg.supervision.auto_progress
             ? "progress: beats from the scripts (NPU_RUN_PROGRESS) and, until a script beats "
               "itself, one per torch optimizer step (--auto-progress on)\n"
             : "progress: beats from the scripts only (NPU_RUN_PROGRESS; --auto-progress off)\n";
  out += fmt::format("health gate: {}{}\n", health_mode_text(cfg.health),
                     cfg.health.user_check.empty()
                         ? ""
                         : fmt::format(", with --health-check-cmd '{}'", cfg.health.user_check));
  for (const WorkerSpec& spec : specs) out += format_spec_text(spec, a);
  return out;
}

namespace {

// What npu_run does with one stream of `spec`, for scripts.
nlohmann::json route_json(const StreamRoute& r, const WorkerSpec& spec) {
  using nlohmann::json;
  const bool relayed = r.sink == StreamSink::kRelay;
  return json{{"sink", kSinkNames.name(r.sink)},
              {"file", r.file.empty() ? json(nullptr) : json(r.file)},
              {"console", r.sink == StreamSink::kInherit || (relayed && r.to_console)},
              {"prefixed", relayed && r.to_console && r.prefixed && !spec.console_prefix.empty()},
              {"tail_read", r.keep_tail},
              {"text", describe_route(r, spec.console_prefix)}};
}

// One worker of the JSON plan: a port not yet held is null.
nlohmann::json worker_json(const WorkerSpec& spec, const Assignment& a) {
  using nlohmann::json;
  json env = json::object();
  for (const auto& [name, value] : spec.contract_env)
    env[name] = is_held_port(name) && a.worker_master_port == 0 ? json(nullptr) : json(value);
  return json{{"local_rank", spec.local_rank},
              {"rank", spec.global_rank},
              {"device_id", spec.device_id},
              {"command", command_of(spec)},
              {"env", env},
              {"stdout", route_json(spec.out, spec)},
              {"stderr", route_json(spec.err, spec)},
              {"console_prefix", spec.console_prefix},
              {"cpus", spec.cpus.empty() ? json(nullptr) : json(spec.cpus)},
              {"numa_node", spec.cpus.empty() ? json(nullptr) : json(spec.numa_node)}};
}

}  // namespace

std::string format_plan_json(const LaunchConfig& cfg, const Assignment& a,
                             const std::vector<WorkerSpec>& specs, const std::string& run_dir) {
  using nlohmann::json;
  nlohmann::json workers = nlohmann::json::array();
  for (const WorkerSpec& spec : specs) workers.push_back(worker_json(spec, a));
  json plan{{"dry_run", true},
            {"nnodes", a.nnodes},
            {"node_rank", a.node_rank},
            {"host", a.host},
            {"nproc_per_node", cfg.shape.nproc_per_node},
            {"world_size", a.world_size},
            {"rank_offset", a.rank_offset},
            {"run_id", cfg.rendezvous.run_id},
            {"rdzv_token_source", token_source(cfg.rendezvous.token).empty()
                                      ? json(nullptr)
                                      : json(token_source(cfg.rendezvous.token))},
            {"role", cfg.worker.role},
            {"max_restarts", cfg.supervision.max_restarts},
            {"auto_progress", cfg.supervision.auto_progress},
            {"term_timeout_s", std::chrono::duration<double>(cfg.supervision.term_timeout).count()},
            {"worker_master_addr", a.worker_master_addr},
            {"worker_master_port",
             a.worker_master_port == 0 ? json(nullptr) : json(a.worker_master_port)},
            {"run_dir", run_dir},
            // Multi-node: ranks and the store come from the rendezvous; these are assumptions.
            {"assumed", a.nnodes > 1},
            {"rendezvous", rendezvous_text(cfg)},
            {"node_order", rdzv::node_order_name(cfg.placement.order)},
            {"topology", a.nnodes > 1 ? json(cfg.placement.path.describe()) : json(nullptr)},
            {"devices", cfg.shape.devices},
            {"health_check", health_mode_text(cfg.health)},
            {"supervision", supervision_json(cfg.supervision)},
            {"records", records_text(cfg, run_dir)},
            {"workers", workers}};
  return plan.dump(2) + "\n";
}

std::string format_plan(const LaunchConfig& cfg, const EnvMap& env, const std::string& host) {
  Assignment assignment = planned_assignment(cfg, host);
  // What the agent will find once connected: the interface of --local-addr, or of the address
  // this host reaches the rendezvous from.
  if (cfg.shape.multi_node()) {
    const std::string address =
        cfg.rendezvous.local_addr.value_or(net::route_source_address(cfg.rendezvous.master_addr));
    assignment.socket_ifname = address.empty() ? "" : net::interface_of_address(address);
  }
  const std::string run_dir = RunDirectory::preview(cfg, env);
  const AttemptLayout layout{run_dir,
                             cfg.output.log_dir.has_value() || cfg.output.log_dir_is_temporary, 0};
  auto specs = make_worker_specs(cfg, assignment, layout, env);
  // What the rooms add as the attempt starts, in the agent's directory yet to be made.
  give_rooms_env(specs, cfg, env, agent_directory_template());
  if (auto scheduler = make_scheduler_spec(cfg, assignment, layout, env))
    specs.insert(specs.begin(), std::move(*scheduler));
  // Every process npu_run starts carries the agent's mark (workers/escaped_processes.hpp).
  for (WorkerSpec& spec : specs)
    spec.contract_env[std::string(kAgentMarkVariable)] = kAgentMarkTemplate;
  return cfg.agent.json ? format_plan_json(cfg, assignment, specs, run_dir)
                        : format_plan_text(cfg, assignment, specs, run_dir);
}

}  // namespace npu_run
