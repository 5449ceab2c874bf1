// Every option of npu_run's commands, each declared once, as a Flag member of its --help group
// (cli/option_set.hpp): its row (spellings, PET_ variable, help, value name, who reads it in a
// launch over ssh) and its value. --help lists a group's rows in the order declared here.
// `npu_run` composes the launch groups (cli/launch_options.hpp); `npu_run rdzv-server` and the
// load generator share the rendezvous group; the server has its own few. The groups of what
// surrounds the workers (output, records, Ascend, health, the agent, hosts, the server) are in
// cli/service_option_groups.hpp.
#pragma once

#include <string>
#include <vector>

#include "basics/token_file.hpp"
#include "cli/option_set.hpp"
#include "cli/service_option_groups.hpp"
#include "cli/value_parsers.hpp"
#include "devices/numa_binding.hpp"

namespace npu_run {

// The job's identity (--nnodes, --run-id, --max-restarts, the token) and its timing: the same
// for every command that runs or joins a rendezvous.
struct RendezvousFlags : FlagGroup {
  // `pet` false: the token's NPU_RUN_RDZV_TOKEN only (a server has no PET_ variables).
  RendezvousFlags(OptionSet& set, const char* group, bool pet) : FlagGroup(set, group, pet) {}

  Flag<std::string> nnodes{
      *this, {.name = "--nnodes", .help = "Number of nodes, N or MIN:MAX (default 1)"}, "1"};
  Flag<std::string> run_id{
      *this,
      {.name = "--run-id",
       .help = "Job id shared by all nodes; names the log directory (default none)",
       .also = "--rdzv-id,--rdzv_id",
       .variable = variable_named("PET_RDZV_ID")},
      "none"};
  Flag<int> max_restarts{
      *this,
      {.name = "--max-restarts",
       .help = "Restart the worker group up to N times after a failure (default 0)"}};
  Flag<std::string> token{
      *this,
      {.name = "--rdzv-token",
       .help = "Shared secret every node proves it knows (HMAC challenge; never sent). Prefer the "
               "NPU_RUN_RDZV_TOKEN variable or --rdzv-token-file: a flag shows in ps until "
               "npu_run has read it",
       .variable = variable_named(kTokenVariable),
       .reach = Reach::kLauncher}};
  Flag<std::string> token_file{
      *this,
      {.name = "--rdzv-token-file",
       .help = "File whose first line is the rendezvous token (mode 600, yours). Inside a Slurm "
               "step a per-job token is derived when none is given",
       .type = "FILE",
       .reach = Reach::kLauncher}};
  Flag<double> join_timeout{
      *this,
      {.name = "--rdzv-timeout",
       .help = "Seconds to wait for all nodes to join (default 900; also rdzv-conf join_timeout)"},
      900};
  Flag<double> last_call{
      *this,
      {.name = "--rdzv-last-call",
       .help = "Elastic --nnodes MIN:MAX: seconds to wait for more nodes once MIN have joined "
               "(default 30; also rdzv-conf last_call_timeout)"},
      30};
  Flag<int> backlog{
      *this,
      {.name = "--rdzv-backlog",
       .help = "Listen backlog of the rendezvous server (default: net.core.somaxconn)"}};
  Flag<double> heartbeat_interval{
      *this,
      {.name = "--heartbeat-interval",
       .help = "Seconds between heartbeats to the rendezvous (default 5)"},
      5};
  Flag<double> heartbeat_timeout{
      *this,
      {.name = "--heartbeat-timeout",
       .help = "Seconds of silence after which a node or the server counts as lost (default 30)"},
      30};
  Flag<double> exit_barrier_timeout{
      *this,
      {.name = "--exit-barrier-timeout",
       .help = "Seconds node 0 waits, after the job ended, for every node to hear it (default "
               "300)"},
      300};
  Flag<double> handshake_timeout{
      *this,
      {.name = "--handshake-timeout",
       .help = "Seconds a new rendezvous connection has to say hello, prove the token and join "
               "(default 10; also rdzv-conf read_timeout)"},
      10};
};

struct ShapeFlags : FlagGroup {
  explicit ShapeFlags(OptionSet& set) : FlagGroup(set, "Job shape") {}

  // Each host of a launch over ssh gets its own, from its slots.
  Flag<std::string> nproc_per_node{
      *this,
      {.name = "--nproc-per-node",
       .help = "Workers per node: N, auto (detected NPUs, else GPUs, else one per CPU), npu, "
               "gpu, or cpu (one per core)",
       .also = "--nproc",
       .reach = Reach::kLauncher},
      "1"};
  Flag<std::string> devices{
      *this,
      {.name = "--devices",
       .help = "Physical device id per local rank, e.g. 4-7 or 0,2,4,6 (default 0..N-1)"}};
  Flag<int> node_rank{*this, {.name = "--node-rank", .help = "Rank of this node (default 0)"}};
  Flag<int> spares{
      *this,
      {.name = "--spares",
       .help = "Agents beyond --nnodes, up to K, join as spares: they pass the health gate, hold "
               "no workers and wait; a spare takes the seat (node rank, ranks, rank-table slot) "
               "of a node that is lost or fails, so no other rank moves (default 0; under Slurm, "
               "the allocation's nodes beyond --nnodes). --node-rank N..N+K-1 names a spare",
       .type = "K"}};
  Flag<std::string> spare_affinity{
      *this,
      {.name = "--spare-affinity",
       .help = "A label of this node (its SuperPoD, rack or switch, e.g. superpod-3); a spare "
               "with the lost node's label is preferred for its seat (default: "
               "superpod-$HCCL_LOGIC_SUPERPOD_ID where that is set, else none)",
       .type = "LABEL"}};
  Flag<std::string> node_order{
      *this,
      {.name = "--node-order",
       .help = "How the rendezvous orders nodes, and so ranks: topology (by SuperPoD, block, "
               "switch and server index where any is known, then host name; the default), host "
               "(host names in natural order: node2 before node10) or arrival",
       .type = "{topology,host,arrival}"},
      "topology"};
  Flag<std::string> topology{
      *this,
      {.name = "--topology",
       .help = "A file of 'HOST PATH' lines, PATH's levels from the top (pod1/spine0/leaf3): "
               "where each node sits, for networks npu_run cannot read",
       .type = "FILE"}};
  Flag<int> sp_block{
      *this,
      {.name = "--sp-block",
       .help = "Atlas A3: devices per logical SuperPoD (MindCluster's sp-block); each block is "
               "a run of adjacent ranks inside one SuperPoD, given to HCCL as "
               "HCCL_LOGIC_SUPERPOD_ID",
       .type = "N"}};
  Flag<std::string> master_addr{
      *this,
      {.name = "--master-addr",
       .help = "Address of the rendezvous host, node 0 (default 127.0.0.1)"},
      "127.0.0.1"};
  Flag<int> master_port{
      *this,
      {.name = "--master-port",
       .help = "Rendezvous port on the master (default 29500); workers get another port"},
      29500};
  Flag<std::string> local_addr{
      *this,
      {.name = "--local-addr",
       .help = "Address of this node that peers should use (multi-NIC hosts)"}};
  Flag<std::string> rdzv_backend{
      *this,
      {.name = "--rdzv-backend",
       .help = "static or c10d (torchrun's names: npu_run's own TCP rendezvous on node 0; c10d's "
               "default port is 29400), or etcd/etcd-v2 (both: etcd v3 elects the agent that "
               "hosts it, and the job survives its loss)",
       .type = "{static,c10d,etcd,etcd-v2}"},
      "static"};
  Flag<std::string> rdzv_endpoint{
      *this,
      {.name = "--rdzv-endpoint",
       .help = "HOST[:PORT] of the rendezvous; decides over --master-addr/--master-port; port 0 "
               "picks a free one (single-node jobs). With etcd: its members, "
               "HOST1:2379,HOST2:2379,..."}};
  Flag<std::string> rdzv_conf{
      *this,
      {.name = "--rdzv-conf",
       .help = "Rendezvous settings key=value,... (timeout, join_timeout, last_call_timeout, "
               "close_timeout, read_timeout: seconds a new connection has to finish its "
               "handshake, default 10; keep_alive_interval and keep_alive_max_attempt: the "
               "heartbeat; is_host=true|false: whether this agent hosts the rendezvous (default: "
               "node 0's does); use_libuv: accepted, no effect, npu_run's store is its own. etcd: "
               "etcd_prefix (default /torchelastic/p2p; keys under PREFIX/RUN_ID), user, "
               "password_file (or NPU_RUN_ETCD_PASSWORD), lease_ttl (seconds, default 5))"}};
  Flag<bool> standalone{
      *this, {.name = "--standalone", .help = "Single-node job with its own local rendezvous"}};
  Flag<std::string> role{
      *this,
      {.name = "--role", .help = "Worker role name (ROLE_NAME; default 'default')"},
      "default"};
  Flag<std::string> cluster{
      *this,
      {.name = "--cluster",
       .help = "Read nnodes, node rank, master and run id from this launcher's environment: auto "
               "(default: Slurm step, mpirun or Kubernetes pod if found), slurm, mpi, k8s, none",
       .type = "{auto,slurm,mpi,k8s,none}"},
      "auto"};
  Flag<std::string> worker_store{
      *this,
      {.name = "--worker-store",
       .help = "Who serves the workers' TCPStore (MASTER_ADDR:MASTER_PORT): agent (default: the "
               "rendezvous host serves it on --master-port, as torchrun 2.x shares its store; a "
               "single node on --master-port when given, else on a free port) or torch (worker "
               "rank 0 hosts torch's own store, as torchrun 1.13 does; also "
               "TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1) or tiered (as agent, and each node's agent "
               "serves its own workers through one connection to node 0's store; the default "
               "above 1024 nodes)",
       .type = "{agent,tiered,torch}"},
      "agent"};
  Flag<int> agents_per_node{
      *this,
      {.name = "--agents-per-node",
       .help = "Agents allowed on one node (default 1: a second srun/mpirun task on a node is "
               "refused); with more, each agent is a node of its own on its own devices"},
      1};
};

struct WorkerFlags : FlagGroup {
  explicit WorkerFlags(OptionSet& set) : FlagGroup(set, "What workers run") {}

  Flag<bool> module{
      *this,
      {.name = "--module", .help = "Run SCRIPT as a module: python -u -m SCRIPT", .also = "-m"}};
  Flag<bool> no_python{
      *this,
      {.name = "--no-python", .help = "Run SCRIPT directly as an executable, without python"}};
  Flag<bool> run_path{
      *this,
      {.name = "--run-path",
       .help = "Accepted for torchrun compatibility; the script runs as python -u SCRIPT"}};
  Flag<std::string> start_method{
      *this,
      {.name = "--start-method",
       .help = "Accepted for torchrun compatibility (spawn, fork, forkserver); ignored",
       .type = "{spawn,fork,forkserver}"},
      "spawn"};
  Flag<bool> virtual_local_rank{
      *this,
      {.name = "--virtual-local-rank",
       .help = "LOCAL_RANK=0 in every worker, with ASCEND_RT_VISIBLE_DEVICES (NPUs) or "
               "CUDA_VISIBLE_DEVICES (GPUs) narrowed to the worker's own device (torchrun 2.x)"}};
  Flag<std::string> numa_binding{
      *this,
      {.name = "--numa-binding",
       .help = "Bind each worker to the CPUs near its NPU or GPU, memory preferred from that NUMA "
               "node (torchrun 2.x): node, socket, exclusive (the node's cores split among its "
               "devices) or core-complex (one last-level cache each)",
       .type = kNumaModeChoices}};
  Flag<std::string> framework{
      *this,
      {.name = "--framework",
       .help = "The workers' framework, whose environment contract they get besides RANK, "
               "LOCAL_RANK, DEVICE_ID, RANK_ID, RANK_SIZE: torch (default), mindspore (MS_* "
               "variables and MindSpore's scheduler started on node 0, or rank-table mode with "
               "--rank-table) or tensorflow (the TF Adapter's rank table, or its CM_* variables "
               "with --tf-cluster env)",
       .type = "{torch,mindspore,tensorflow}"},
      "torch"};
  Flag<std::string> tf_cluster{
      *this,
      {.name = "--tf-cluster",
       .help = "--framework tensorflow: how the TF Adapter learns the cluster: rank-table "
               "(default; needs --rank-table) or env (CM_CHIEF_IP, CM_CHIEF_PORT, "
               "CM_CHIEF_DEVICE, CM_WORKER_SIZE, CM_WORKER_IP, and no rank table)",
       .type = "{rank-table,env}"},
      "rank-table"};
};

struct SupervisionFlags : FlagGroup {
  explicit SupervisionFlags(OptionSet& set) : FlagGroup(set, "Supervision") {}

  Flag<double> monitor_interval{
      *this,
      {.name = "--monitor-interval",
       .help = "Accepted for torchrun compatibility; npu_run reacts to exits at once"},
      0.1};
  Flag<double> term_timeout{
      *this,
      {.name = "--term-timeout",
       .help = "Seconds between SIGTERM and SIGKILL when stopping workers (default 30)",
       .also = "--shutdown-timeout,--shutdown_timeout"},
      30.0};
  Flag<std::string> hang_timeout{
      *this,
      {.name = "--hang-timeout",
       .help = "A worker that sent a progress beat (NPU_RUN_PROGRESS) and then none for S seconds "
               "is hung: every worker's stacks are dumped and the job fails (a restart if any "
               "are left). 'auto' learns it: 5 times the longest silence between beats seen, at "
               "least 300 s (auto:S for another floor). 0 or off: none (the default)",
       .type = "S|auto[:S]|off"}};
  Flag<std::string> auto_progress{
      *this,
      {.name = "--auto-progress",
       .help = "on (the default): every Python worker beats once per optimizer step of torch "
               "(\"step N\"), so --hang-timeout works for scripts that never beat; a script's "
               "own beats replace these. off: only the script's beats",
       .type = "{on,off}"},
      "on"};
  Flag<double> exit_timeout{
      *this,
      {.name = "--exit-timeout",
       .help = "A worker still running S seconds after every other local worker exited 0 is hung "
               "(a straggler that never exits); 0, the default, waits forever",
       .type = "S"}};
  Flag<int> max_no_progress_restarts{
      *this,
      {.name = "--max-no-progress-restarts",
       .help = "Stop restarting, and exit 123 (do not requeue), once N restarts in a row ended "
               "before any rank beat (NPU_RUN_PROGRESS) past its best so far; 0, the default, "
               "never",
       .type = "N"}};
  Flag<double> startup_window{
      *this,
      {.name = "--startup-window",
       .help = "A worker that fails within S seconds of its start with an ImportError, "
               "ModuleNotFoundError, SyntaxError or a usage error stops the job at once with 123 "
               "(do not requeue): a restart would fail the same way (default 60)",
       .type = "S"},
      60.0};
  Flag<double> device_release_timeout{
      *this,
      {.name = "--device-release-timeout",
       .help = "Before each attempt this node's devices must be free: the job's own leftovers "
               "are killed, another program holding one is waited for up to S seconds, then "
               "the node counts as failed and a spare takes its place (default 30)",
       .type = "S"},
      30.0};
  Flag<std::string> ledger{
      *this,
      {.name = "--ledger",
       .help = "The ledger of bad nodes: every node the job takes out (lost, a failed health "
               "gate, a device fault) is appended, and agents on its hosts are refused until the "
               "entry expires or is cleared (npu_run ledger); default <log dir>/ledger.jsonl "
               "with --log-dir, else none",
       .type = "FILE"}};
  Flag<double> ledger_ttl{
      *this,
      {.name = "--ledger-ttl",
       .help = "Seconds a ledger entry keeps its host out (default 86400: a day)",
       .type = "S"},
      86400.0};
  Flag<std::string> straggler{
      *this,
      {.name = "--straggler",
       .help = "During the run, name the node whose ranks enter collectives last, keeping their "
               "peers waiting over 30 % of the time in three windows in a row, read from torch's "
               "flight recorders (torch 2.8 and later); replace also hands its seat to a ready "
               "spare (needs --spares) (default warn)",
       .type = "{off,warn,replace}"},
      "warn"};
  Flag<double> straggler_window{
      *this,
      {.name = "--straggler-window",
       .help = "Seconds of each window the straggler watch scores (default 30)",
       .type = "S"},
      30.0};
  Flag<std::string> signals_to_handle{
      *this,
      {.name = "--signals-to-handle",
       .help = "Signals that stop the job after forwarding them to workers (default "
               "SIGTERM,SIGINT,SIGHUP,SIGQUIT); SIGUSR1/SIGUSR2 are otherwise forwarded only"},
      "SIGTERM,SIGINT,SIGHUP,SIGQUIT"};
};

}  // namespace npu_run
