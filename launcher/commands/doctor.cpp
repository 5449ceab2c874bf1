// `npu_run doctor`: checks of this host for large or Ascend jobs, each ok, warn or fail with the
// command that fixes it; exit status 1 when a check fails.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <boost/asio/ip/host_name.hpp>
#include <iostream>
#include <nlohmann/json.hpp>

#include "ascend/hccn_conf.hpp"
#include "cli/value_parsers.hpp"
#include "cluster/cluster_env.hpp"
#include "commands/commands.hpp"
#include "devices/device_list.hpp"
#include "etcd/endpoints.hpp"
#include "health/verdict.hpp"

namespace npu_run {

namespace {

constexpr const char* kDoctorCommand = "npu_run doctor";

class DoctorOptions : public OptionTable {
 public:
  DoctorOptions()
      : app_(
            "npu_run doctor [--nnodes N] [OPTIONS]\n\nCheck this host for large or Ascend jobs: "
            "kernel queues, HCCL's reserved ports, open files, the master port, devices and "
            "hccn.conf, and with --rdzv-backend etcd whether etcd's members answer. Each check "
            "prints ok, warn or fail with the command that fixes it; the "
            "exit status is 1 when a check fails.",
            kDoctorCommand) {
    nnodes_option = app_.add_option("--nnodes", nnodes,
                                    "Nodes of the planned job, N or MIN:MAX: scales the "
                                    "recommendations");
    master_addr = app_.add_option("--master-addr,--master_addr", cmd.settings.master_addr,
                                  "Rendezvous host to check the port on");
    master_port = app_.add_option("--master-port,--master_port", cmd.settings.master_port,
                                  "Rendezvous port that must be free");
    app_.add_option("--hccn-conf,--hccn_conf", hccn_conf,
                    "Device addresses file (default /etc/hccn.conf)")
        ->type_name("FILE");
    app_.add_option("--proc-root", proc_root, "Read kernel settings under this /proc (tests)")
        ->type_name("DIR");
    app_.add_option("--rdzv-backend,--rdzv_backend", rdzv_backend,
                    "With etcd (or etcd-v2): check the members of --rdzv-endpoint answer")
        ->type_name("NAME");
    app_.add_option("--rdzv-endpoint,--rdzv_endpoint", rdzv_endpoint,
                    "The etcd members, host:port,... as the job's launch line gives them")
        ->type_name("LIST");
    app_.add_flag("--json", cmd.json, "Print the checks as JSON");
    devices = app_.add_option("--devices", device_list,
                              "Run the health gate's node checks (npu-smi, hccn_tool, nvidia-smi, "
                              "--health-check-cmd) on these devices, or on every device found")
                  ->expected(0, 1)
                  ->type_name("[LIST]");
    app_.add_option("--health-check-cmd", health_check_cmd,
                    "With --devices: also run this command (sh -c); exit 0 passes")
        ->type_name("CMD");
    app_.add_option("--health-flap-window", flap_window,
                    "With --devices: warn of a link that went down this many minutes ago")
        ->type_name("MIN");
    app_.add_option("--health-timeout", health_timeout,
                    "With --devices: seconds for all checks, and each call's own timeout")
        ->type_name("S[,CALL_S]");
  }
  CLI::App& app() override { return app_; }

  CLI::App app_;
  DoctorCommand cmd;
  std::string nnodes = "1";
  std::string hccn_conf;
  std::string proc_root;
  CLI::Option *nnodes_option, *master_addr, *master_port, *devices;
  std::string device_list, health_check_cmd, health_timeout = "60,15";
  std::string rdzv_backend, rdzv_endpoint;
  int flap_window = 10;
};

// --devices[=LIST]: the listed physical ids, or those discovery finds; NPUs unless GPUs are found.
NodeHealthOptions device_checks(const DoctorOptions& o, const EnvMap& env) {
  const DiscoveredDevices found = discover_devices(env);
  NodeHealthOptions options;
  options.host = boost::asio::ip::host_name();
  options.kind = found.kind == DeviceKind::kNone ? DeviceKind::kAscend : found.kind;
  options.devices =
      o.device_list.empty() ? found.physical_ids : parse_device_list(o.device_list, "--devices");
  if (options.devices.empty()) {
    throw UsageError(
        "--devices: no NPU or GPU found on this host; name the devices to check (--devices 0-7)");
  }
  options.user_check = o.health_check_cmd;
  if (o.flap_window < 1 || o.flap_window > 24 * 60) {
    throw UsageError(
        fmt::format("--health-flap-window {}: give minutes between 1 and 1440", o.flap_window));
  }
  options.flap_window_min = o.flap_window;
  return options;
}

// --rdzv-backend etcd --rdzv-endpoint LIST: the members to ask (checked as a launch checks them).
std::string etcd_members(const DoctorOptions& o) {
  const bool etcd = o.rdzv_backend == "etcd" || o.rdzv_backend == "etcd-v2";
  if (!o.rdzv_backend.empty() && !etcd) {
    throw UsageError(
        fmt::format("--rdzv-backend {}: npu_run doctor checks etcd's members only; "
                    "give --rdzv-backend etcd, or check the master with "
                    "--master-addr and --master-port",
                    o.rdzv_backend));
  }
  if (etcd != !o.rdzv_endpoint.empty()) {
    throw UsageError(
        "--rdzv-backend etcd and --rdzv-endpoint go together: --rdzv-backend etcd "
        "--rdzv-endpoint host1:2379,host2:2379,host3:2379");
  }
  if (!etcd) return "";
  try {
    (void)etcd::parse_endpoints(o.rdzv_endpoint);
  } catch (const std::invalid_argument& e) {
    throw UsageError(fmt::format("--rdzv-endpoint '{}': {}", o.rdzv_endpoint, e.what()));
  }
  return o.rdzv_endpoint;
}

DoctorCommand resolve(const DoctorOptions& o, const EnvMap& env) {
  DoctorCommand cmd = o.cmd;
  cmd.settings.env = env;
  cmd.settings.proc_root =
      !o.proc_root.empty() ? o.proc_root : lookup(env, "NPU_RUN_PROC_ROOT").value_or("/proc");
  cmd.settings.hccn_conf = !o.hccn_conf.empty()
                               ? o.hccn_conf
                               : lookup(env, "NPU_RUN_HCCN_CONF").value_or(kDefaultHccnConf);
  cmd.settings.nnodes = parse_nnodes(o.nnodes, "--nnodes").second;
  // Inside a Slurm step or under mpirun, check what the launch there will use: the job's node
  // count and its derived master address and port. (Any number of tasks per node may run the
  // doctor, so none is refused here.)
  const ClusterDefaults cluster = detect_cluster(env, ClusterKind::kAuto, 1024);
  if (o.nnodes_option->count() == 0 && cluster.nnodes) cmd.settings.nnodes = *cluster.nnodes;
  if (o.master_addr->count() == 0 && cluster.master_addr)
    cmd.settings.master_addr = *cluster.master_addr;
  if (o.master_port->count() == 0 && cluster.master_port)
    cmd.settings.master_port = *cluster.master_port;
  if (cluster.node_rank && *cluster.node_rank != 0)
    cmd.settings.other_node_rank = cluster.node_rank;
  if (cmd.settings.master_port < 1 || cmd.settings.master_port > 65535) {
    throw UsageError(fmt::format("--master-port {}: a port must be between 1 and 65535",
                                 cmd.settings.master_port));
  }
  cmd.settings.etcd_endpoints = etcd_members(o);
  if (o.devices->count() > 0) {
    cmd.devices = device_checks(o, env);
    cmd.health_run = parse_health_timeout(o.health_timeout, "--health-timeout");
  }
  return cmd;
}

}  // namespace

std::variant<DoctorCommand, EarlyExit> parse_doctor_command(const std::vector<std::string>& args,
                                                            const EnvMap& env) {
  return parse_subcommand<DoctorOptions>(
      args, kDoctorCommand, [&](const DoctorOptions& options) { return resolve(options, env); });
}

int doctor(const DoctorCommand& command) {
  if (command.devices) {
    const EnvMap env = current_environment();
    const NodeVerdict verdict =
        run_node_checks(node_check_settings(env, *command.devices), command.health_run);
    if (command.json) {
      std::cout << nlohmann::json(verdict).dump(2) << "\n";
    } else {
      std::cout << format_verdict_text(verdict);
    }
    return verdict.failed() ? 1 : 0;
  }
  const auto results = run_doctor(command.settings);
  std::cout << (command.json ? format_doctor_json(command.settings, results)
                             : format_doctor_text(command.settings, results));
  return doctor_exit_code(results);
}

std::unique_ptr<OptionTable> doctor_options() {
  return std::make_unique<DoctorOptions>();
}

}  // namespace npu_run
