#include "cli/launch_options.hpp"

#include <CLI/CLI.hpp>

#include "cli/value_parsers.hpp"
#include "npu_run/version.hpp"

namespace npu_run {

namespace {

const char* const kFooter = R"(Examples:
  npu_run --nproc-per-node 8 train.py --cfg a.yaml
  npu_run --nproc-per-node auto --devices 4-7 train.py          # 4 workers on NPUs 4..7
  npu_run --nproc-per-node 4 -m mypkg.train --lr 0.1              # python -u -m mypkg.train
  npu_run --nproc-per-node 2 --no-python ./run.sh                  # any executable
  npu_run --nproc-per-node 8 --log-dir logs -t 3 --local-ranks-filter 0 train.py
                                                # rank 0 on the console, every rank in logs/
  npu_run --nproc-per-node 8 --dry-run --json train.py            # show the plan, start nothing

Every option can also come from the environment as PET_<NAME> (e.g. PET_NPROC_PER_NODE=8);
the command line wins. Workers run $PYTHON_EXEC -u SCRIPT ARGS (PYTHON_EXEC defaults to python3).
"${local_rank}" in ARGS is replaced by each worker's local rank, as torchrun does.

Exit status: 0 when every worker succeeded; the root-cause worker's exit code (128+N for a
signal) when one failed; 128+N when npu_run was stopped by signal N; 2 for usage errors;
125 when the rendezvous failed (nodes missing, agents disagreeing, a node or the server lost).

Several nodes: run the same command on each with --nnodes N --master-addr NODE0 [--node-rank R];
node 0's agent hosts the rendezvous. `npu_run rdzv-server --help` runs it on a host of its own.
Or start them all from here over ssh: --hosts server0:8,server1:8 (or --hostfile FILE).
)";

}  // namespace

template <typename T>
CLI::Option* LaunchOptions::add(const std::string& dashed, T& target, const std::string& help,
                                const char* group, const std::string& also) {
  const std::string names = OptionNames::spellings(dashed) + (also.empty() ? "" : "," + also);
  CLI::Option* option = app_->add_option(names, target, help)->group(group);
  names_.bind(option, OptionNames::env_name(dashed));
  return option;
}

CLI::Option* LaunchOptions::add_flag(const std::string& dashed, bool& target,
                                     const std::string& help, const char* group,
                                     const std::string& also) {
  const std::string names = OptionNames::spellings(dashed) + (also.empty() ? "" : "," + also);
  CLI::Option* option = app_->add_flag(names, target, help)->group(group);
  names_.bind(option, OptionNames::env_name(dashed));
  return option;
}

LaunchOptions::LaunchOptions()
    : app_(std::make_unique<CLI::App>(
          "npu_run [OPTIONS] SCRIPT [ARGS...]\n\nLaunch one worker per device, on one node or "
          "many; a drop-in for torchrun's command line.",
          "npu_run")) {
  app_->set_version_flag("--version", std::string("npu_run ") + kVersion);
  app_->footer(kFooter);
  app_->prefix_command();  // parsing stops at the script; everything after it is the script's
  // As argparse: an option given twice takes the last value (scripts append overrides).
  app_->option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  add_shape("Job shape");
  rdzv = add_rendezvous_options(*app_, flags_.rdzv, names_, "Rendezvous",
                                RendezvousVariables::kPetAndToken);
  add_what_runs("What workers run");
  add_supervision_and_output("Supervision", "Worker output");
  add_ascend_and_agent("Ascend", "Agent");
  add_hosts("Many hosts (ssh)");
}

LaunchOptions::~LaunchOptions() = default;

void LaunchOptions::add_shape(const char* shape) {
  LaunchFlags& f = flags_;
  nproc = add(
      "--nproc-per-node", f.nproc_per_node,
      "Workers per node: N, auto (detected NPUs, else GPUs, else one per CPU), npu, gpu, or cpu "
      "(one per core)",
      shape, "--nproc");
  devices = add("--devices", f.devices,
                "Physical device id per local rank, e.g. 4-7 or 0,2,4,6 (default 0..N-1)", shape);
  node_rank = add("--node-rank", f.node_rank, "Rank of this node (default 0)", shape);
  master_addr = add("--master-addr", f.master_addr,
                    "Address of the rendezvous host, node 0 (default 127.0.0.1)", shape);
  master_port =
      add("--master-port", f.master_port,
          "Rendezvous port on the master (default 29500); workers get another port", shape);
  local_addr = add("--local-addr", f.local_addr,
                   "Address of this node that peers should use (multi-NIC hosts)", shape);
  rdzv_backend = add("--rdzv-backend", f.rdzv_backend,
                     "static or c10d (torchrun's names; npu_run always uses its own TCP "
                     "rendezvous, and c10d's default port is 29400); etcd and etcd-v2 are "
                     "refused",
                     shape)
                     ->type_name("{static,c10d,etcd,etcd-v2}");
  rdzv_endpoint = add("--rdzv-endpoint", f.rdzv_endpoint,
                      "HOST[:PORT] of the rendezvous; decides over --master-addr/--master-port; "
                      "port 0 picks a free one (single-node jobs)",
                      shape);
  rdzv_conf = add("--rdzv-conf", f.rdzv_conf,
                  "Rendezvous settings key=value,... (timeout, join_timeout, last_call_timeout, "
                  "close_timeout, read_timeout: seconds a new connection has to finish its "
                  "handshake, default 10; keep_alive_interval and keep_alive_max_attempt: the "
                  "heartbeat; is_host=true|false: whether this agent hosts the rendezvous "
                  "(default: node 0's does); use_libuv: accepted, no effect, npu_run's store "
                  "is its own)",
                  shape);
  standalone = add_flag("--standalone", f.standalone,
                        "Single-node job with its own local rendezvous", shape);
  role = add("--role", f.role, "Worker role name (ROLE_NAME; default 'default')", shape);
  cluster = add("--cluster", f.cluster,
                "Read nnodes, node rank, master and run id from this launcher's environment: auto "
                "(default: Slurm step, mpirun or Kubernetes pod if found), slurm, mpi, k8s, none",
                shape)
                ->type_name("{auto,slurm,mpi,k8s,none}");
  worker_store =
      add("--worker-store", f.worker_store,
          "Who serves the workers' TCPStore (MASTER_ADDR:MASTER_PORT): agent (default: the "
          "rendezvous host serves it on --master-port, as torchrun 2.x shares its store; a "
          "single node on --master-port when given, else on a free port) or torch (worker rank "
          "0 hosts torch's own store, as torchrun 1.13 does; also "
          "TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1) or tiered (as agent, and each node's agent "
          "serves its own workers through one connection to node 0's store; the default above "
          "1024 nodes)",
          shape)
          ->type_name("{agent,tiered,torch}");
  agents_per_node = add("--agents-per-node", f.agents_per_node,
                        "Agents allowed on one node (default 1: a second srun/mpirun task on a "
                        "node is refused); with more, each agent is a node of its own on its own "
                        "devices",
                        shape);
}

void LaunchOptions::add_what_runs(const char* what) {
  LaunchFlags& f = flags_;
  module =
      add_flag("--module", f.module, "Run SCRIPT as a module: python -u -m SCRIPT", what, "-m");
  no_python = add_flag("--no-python", f.no_python,
                       "Run SCRIPT directly as an executable, without python", what);
  run_path =
      add_flag("--run-path", f.run_path,
               "Accepted for torchrun compatibility; the script runs as python -u SCRIPT", what);
  start_method = add("--start-method", f.start_method,
                     "Accepted for torchrun compatibility (spawn, fork, forkserver); ignored", what)
                     ->type_name("{spawn,fork,forkserver}");
  virtual_local_rank =
      add_flag("--virtual-local-rank", f.virtual_local_rank,
               "LOCAL_RANK=0 in every worker, with ASCEND_RT_VISIBLE_DEVICES (NPUs) or "
               "CUDA_VISIBLE_DEVICES (GPUs) narrowed to the worker's own device (torchrun 2.x)",
               what);
  numa_binding =
      add("--numa-binding", f.numa_binding,
          "Bind each worker to the CPUs near its NPU or GPU, memory preferred from that NUMA "
          "node (torchrun 2.x): node, socket, exclusive (the node's cores split among its "
          "devices) or core-complex (one last-level cache each)",
          what)
          ->type_name(kNumaModeChoices);
  no_python->excludes(module)->excludes(run_path);
}

std::string LaunchOptions::exclusion_reason(const std::string& clash) const {
  // CLI11 says "--no-python excludes --module"; say why, too.
  if (clash.find("--include") != std::string::npos && clash.find("--exclude") != std::string::npos)
    return "--include and --exclude cannot be combined: one names what to use, the other what "
           "to leave out; drop one";
  if (clash.find("--no-python") == std::string::npos) return clash;
  if (clash.find("--module") != std::string::npos)
    return "--no-python and --module cannot be combined: a module needs python; drop one";
  if (clash.find("--run-path") != std::string::npos)
    return "--no-python and --run-path cannot be combined: --run-path runs python; drop one";
  return clash;
}

void LaunchOptions::add_supervision_and_output(const char* supervise, const char* logs) {
  LaunchFlags& f = flags_;
  monitor_interval =
      add("--monitor-interval", f.monitor_interval,
          "Accepted for torchrun compatibility; npu_run reacts to exits at once", supervise);
  term_timeout = add("--term-timeout", f.term_timeout,
                     "Seconds between SIGTERM and SIGKILL when stopping workers (default 30)",
                     supervise, "--shutdown-timeout,--shutdown_timeout");
  hang_timeout =
      add("--hang-timeout", f.hang_timeout,
          "A worker that sent a progress beat (NPU_RUN_PROGRESS) and then none for S seconds is "
          "hung: every worker's stacks are dumped and the job fails (a restart if any are left). "
          "'auto' learns it: 5 times the longest silence between beats seen, at least 300 s "
          "(auto:S for another floor)",
          supervise)
          ->type_name("S|auto[:S]");
  exit_timeout = add("--exit-timeout", f.exit_timeout,
                     "A worker still running S seconds after every other local worker exited 0 "
                     "is hung (a straggler that never exits); 0, the default, waits forever",
                     supervise)
                     ->type_name("S");
  max_no_progress_restarts =
      add("--max-no-progress-restarts", f.max_no_progress_restarts,
          "Stop restarting, and exit 123 (do not requeue), once N restarts in a row ended "
          "before any rank beat (NPU_RUN_PROGRESS) past its best so far; 0, the default, never",
          supervise)
          ->type_name("N");
  signals = add("--signals-to-handle", f.signals_to_handle,
                "Signals that stop the job after forwarding them to workers (default "
                "SIGTERM,SIGINT,SIGHUP,SIGQUIT); SIGUSR1/SIGUSR2 are otherwise forwarded only",
                supervise);
  log_dir =
      add("--log-dir", f.log_dir,
          "Each run gets <dir>/<run_id>_XXXXXX/attempt_<n>/<local_rank>/ with error files, and "
          "{stdout,stderr}.log for the streams -r/-t name",
          logs)
          ->type_name("DIR");
  redirects = add("--redirects", f.redirects,
                  "Streams sent only to log files: 0 none, 1 stdout, 2 stderr, 3 both, or per "
                  "local rank like 0:3,12:1",
                  logs, "-r");
  tee = add("--tee", f.tee, "Streams written to log files and the console (same syntax as -r)",
            logs, "-t");
  filter = add("--local-ranks-filter", f.local_ranks_filter,
               "Only these local ranks reach the console, e.g. 0 or 0,1 (others: log files or "
               "nothing)",
               logs);
  stdout_filters = add("--duplicate-stdout-filters", f.stdout_filters,
                       "Copy the console-bound stdout lines that contain any of these strings "
                       "(comma-separated; ',,' is a comma) to attempt_<n>/filtered_stdout.log "
                       "in the run's log directory (torchrun 2.x)",
                       logs)
                       ->type_name("TEXT,...");
  stderr_filters = add("--duplicate-stderr-filters", f.stderr_filters,
                       "The same for stderr lines, into attempt_<n>/filtered_stderr.log", logs)
                       ->type_name("TEXT,...");
  event_log_handler = add("--event-log-handler", f.event_log_handler,
                          "Accepted for torchrun 2.x compatibility; npu_run has no event "
                          "handlers: its log lines record the job's events",
                          logs);
  logs_specs = add("--logs-specs", f.logs_specs,
                   "Accepted for torchrun 2.x compatibility; npu_run loads no logging plugins: "
                   "--log-dir, -r and -t choose the files",
                   logs);
  prefix = add("--log-line-prefix-template", f.prefix_template,
               "Prefix of relayed console lines; ${rank} ${local_rank} ${node_rank} ${role_name} "
               "${host} (default '[${role_name}${local_rank}]:' when teeing, as torchrun; '' for "
               "none; also TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE)",
               logs);
}

void LaunchOptions::add_ascend_and_agent(const char* ascend, const char* agent) {
  LaunchFlags& f = flags_;
  soc = add("--soc", f.soc,
            "Enforce the device topology rules of a server series: atlas-training, atlas-a2, "
            "atlas-a3, none (default)",
            ascend)
            ->type_name("{atlas-training,atlas-a2,atlas-a3,none}");
  rank_table = add("--rank-table", f.rank_table,
                   "HCCL rank table: a file to check against the job and export as "
                   "RANK_TABLE_FILE, or auto to build one through the rendezvous",
                   ascend)
                   ->type_name("FILE");
  hccn_conf = add("--hccn-conf", f.hccn_conf,
                  "Device addresses for --rank-table auto (default $NPU_RUN_HCCN_CONF, else "
                  "/etc/hccn.conf)",
                  ascend)
                  ->type_name("FILE");
  log_level = add("--log-level", f.log_level,
                  "Agent log level: trace, debug, info, warn, error, critical, off", agent)
                  ->type_name(kLogLevelChoices);
  dry_run =
      add_flag("--dry-run", f.dry_run,
               "Print the resolved plan (nodes, ranks, commands, environment) and exit", agent);
  json = add_flag("--json", f.json, "With --dry-run: print the plan as JSON", agent);
}

bool LaunchOptions::launches_hosts() const {
  return host_options.hosts->count() > 0 || host_options.hostfile->count() > 0;
}

// Read by the launching npu_run only; none has a PET_ variable (torchrun has no such options).
void LaunchOptions::add_hosts(const char* group) {
  HostsFlags& f = flags_.hosts;
  HostOptions& o = host_options;
  auto add_plain = [&](const std::string& dashed, auto& target, const std::string& help) {
    return app_->add_option(OptionNames::spellings(dashed), target, help)->group(group);
  };
  // Given again and again, one value each time ("--env A --env B script.py": the script is not a
  // third value).
  auto add_repeated = [&](const std::string& dashed, std::vector<std::string>& target,
                          const std::string& help, const std::string& type) {
    return add_plain(dashed, target, help)
        ->expected(1)
        ->allow_extra_args(false)
        ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
        ->type_name(type);
  };
  o.hosts = add_plain("--hosts", f.hosts,
                      "Start the job on these hosts over ssh, one agent each: HOST[:SLOTS],... "
                      "(horovodrun's -H; Slurm hostlists such as node[01-04]:8); the first is "
                      "node 0. SLOTS sets the host's workers (default --nproc-per-node)")
                ->type_name("HOSTS");
  o.hostfile = add_plain("--hostfile", f.hostfile,
                         "As --hosts, from a DeepSpeed hostfile: 'HOST slots=N' lines, # comments")
                   ->type_name("FILE");
  o.include = add_plain("--include", f.include,
                        "Use only these hosts or devices: HOST[:SLOT,...]@HOST... (DeepSpeed's "
                        "syntax)")
                  ->type_name("FILTER");
  o.exclude =
      add_plain("--exclude", f.exclude, "Leave out these hosts or devices: HOST[:SLOT,...]@HOST...")
          ->type_name("FILTER");
  o.ssh_port = add_plain("--ssh-port", f.ssh_port, "ssh's -p for every host (default: ssh's)");
  o.ssh_option = add_repeated(
      "--ssh-option", f.ssh_options,
      "ssh's -o OPTION=VALUE for every host; repeatable (~/.ssh/config applies too)", "OPT=VALUE");
  o.env = add_repeated("--env", f.env,
                       "Pass this variable to every host: NAME (its value here) or NAME=VALUE; "
                       "repeatable. PATH, PYTHONPATH, PYTHON_EXEC and NPU_RUN_* pass by default",
                       "NAME[=VALUE]");
  o.env_file = add_repeated("--env-file", f.env_files,
                            "NAME=VALUE lines passed to every host, as DeepSpeed's .deepspeed_env "
                            "(default: .npu_run_env here, then in $HOME, if present); repeatable",
                            "FILE");
  o.ship_binary = app_->add_flag(OptionNames::spellings("--ship-binary"), f.ship_binary,
                                 "Copy this npu_run to each host first (~/.cache/npu_run), "
                                 "instead of running the same path there")
                      ->group(group);
  o.ssh_fanout = add_plain("--ssh-fanout", f.ssh_fanout,
                           "ssh connections being opened at once (default 32, as pdsh)");
  o.ssh_tree = app_->add_flag(OptionNames::spellings("--ssh-tree"), f.ssh_tree,
                              "Where hosts can ssh to each other: each host started here starts "
                              "others in turn, --ssh-fanout at a time (1,000 hosts in 2 rounds)")
                   ->group(group);
  o.include->excludes(o.exclude);
}

}  // namespace npu_run
