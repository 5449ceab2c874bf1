// `npu_run doctor`: checks of this host for large or Ascend jobs, each ok, warn or fail with the
// command that fixes it; exit status 1 when a check fails.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <iostream>

#include "ascend/hccn_conf.hpp"
#include "cli/value_parsers.hpp"
#include "cluster/cluster_env.hpp"
#include "commands/commands.hpp"

namespace npu_run {

namespace {

constexpr const char* kCommand = "npu_run doctor";

class DoctorOptions : public OptionTable {
 public:
  DoctorOptions()
      : app_(
            "npu_run doctor [--nnodes N] [OPTIONS]\n\nCheck this host for large or Ascend jobs: "
            "kernel queues, HCCL's reserved ports, open files, the master port, devices and "
            "hccn.conf. Each check prints ok, warn or fail with the command that fixes it; the "
            "exit status is 1 when a check fails.",
            kCommand) {
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
    app_.add_flag("--json", cmd.json, "Print the checks as JSON");
  }
  CLI::App& app() override { return app_; }

  CLI::App app_;
  DoctorCommand cmd;
  std::string nnodes = "1";
  std::string hccn_conf;
  std::string proc_root;
  CLI::Option *nnodes_option, *master_addr, *master_port;
};

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
  return cmd;
}

}  // namespace

std::variant<DoctorCommand, EarlyExit> parse_doctor_command(const std::vector<std::string>& args,
                                                            const EnvMap& env) {
  return parse_subcommand<DoctorOptions>(
      args, kCommand, [&](const DoctorOptions& options) { return resolve(options, env); });
}

int doctor(const DoctorCommand& command) {
  const auto results = run_doctor(command.settings);
  std::cout << (command.json ? format_doctor_json(command.settings, results)
                             : format_doctor_text(command.settings, results));
  return doctor_exit_code(results);
}

std::unique_ptr<OptionTable> doctor_options() {
  return std::make_unique<DoctorOptions>();
}

}  // namespace npu_run
