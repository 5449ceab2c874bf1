// LaunchConfig: everything a launch was asked for (command line, PET_* variables, the scheduler's
// environment), resolved and checked once by the cli layer, one sub-struct per concern. Nothing
// downstream re-parses flags or reads the files they name again; later stages only read this.
#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <variant>
#include <vector>

#include "ascend/rank_table.hpp"
#include "ascend/topology.hpp"
#include "basics/topology_path.hpp"
#include "config/rank_stream_map.hpp"
#include "devices/numa_binding.hpp"
#include "health/gate_settings.hpp"

namespace npu_run {

using std::chrono::milliseconds;

enum class WorkerMode {
  kPythonScript,  // $PYTHON_EXEC -u SCRIPT ARGS
  kPythonModule,  // $PYTHON_EXEC -u -m MODULE ARGS
  kExecutable,    // --no-python: SCRIPT ARGS
};

// What each worker runs.
// --framework: the worker environment contract added to the common one (RANK, LOCAL_RANK,
// DEVICE_ID, RANK_ID, RANK_SIZE, ...; agent/plan/framework_env.hpp): torch's (the default),
// MindSpore's (a dynamic cluster around a scheduler process on node 0, or rank-table mode) or
// the TF Adapter's (a rank table, or its CM_* variables).
enum class Framework { kTorch, kMindSpore, kTensorFlow };
// --tf-cluster: how the TF Adapter learns the cluster.
enum class TfCluster { kRankTable, kEnv };

// msrun --sim_level/--sim_rank_id: MindSpore's own dry run. No cluster is built (no scheduler,
// no MS_ROLE or MS_SCHED_*); each process compiles as rank `rank_id` of `worker_num` would.
struct MindSporeSimulation {
  int level = 0;       // MS_SIMULATION_LEVEL
  int rank_id = -1;    // RANK_ID of the one process; -1: first_rank + each one's local rank
  int first_rank = 0;  // msrun's --node_rank * --local_worker_num
  int worker_num = 1;  // MS_WORKER_NUM and RANK_SIZE: the job simulated
};

struct WorkerCommand {
  WorkerMode mode = WorkerMode::kPythonScript;
  std::string entrypoint;         // script, module, or executable as the user wrote it
  std::vector<std::string> args;  // the user's arguments after it (before ${local_rank} expansion)
  std::string program;            // absolute path of the file exec'd: python or the executable
  std::string role = "default";   // ROLE_NAME
  // --virtual-local-rank: LOCAL_RANK=0, and this variable (empty: none, a CPU job) set to the
  // worker's own device.
  bool virtual_local_rank = false;
  std::string visible_devices_variable;
  // torchrun 2.x options npu_run accepts without acting on them, for the agent to say so.
  std::vector<std::string> accepted_notes;
  // --numa-binding: the mode, and each local rank's CPUs and memory node (empty: unbound).
  std::optional<NumaMode> numa_mode;
  std::vector<NumaPlacement> numa;
  Framework framework = Framework::kTorch;
  TfCluster tf_cluster = TfCluster::kRankTable;
  std::optional<MindSporeSimulation> ms_simulation;  // set by `npu_run msrun` only
};

// How many nodes and workers, on which devices.
struct JobShape {
  int nproc_per_node = 1;
  std::vector<int> devices;    // physical device id of each local rank
  std::string devices_source;  // "default 0..N-1", "--devices", or what discovery found
  int min_nodes = 1;
  int max_nodes = 1;
  std::optional<int> node_rank;  // unset: assigned by the rendezvous
  int agents_per_node = 1;       // --agents-per-node
  int spares = 0;                // --spares: agents beyond max_nodes that wait as spares
  std::string spare_affinity;    // --spare-affinity

  // The node rank came from the scheduler's variables (SLURM_NODEID), not --node-rank: where
  // the node's place in the network is known, the rendezvous seats it by that instead.
  bool node_rank_from_scheduler = false;

  // A spare makes even a one-node job a rendezvous of several agents.
  bool multi_node() const { return max_nodes + spares > 1; }
};

// Where this node sits in the network, and how the rendezvous orders nodes by it (--node-order,
// --topology, --sp-block). `path` is found when the agent starts (agent/health/topology_probe.hpp).
struct Placement {
  NodeOrder order = NodeOrder::kTopology;
  std::map<std::string, std::vector<std::string>> file;  // --topology: host -> levels
  std::string file_source;                               // "--topology /etc/npu_run/topo"
  int sp_block = 0;  // devices per logical SuperPoD; 0: none cut
  TopologyPath path;
};

// The times and queue of a rendezvous: the same options, checks and defaults for the agents and
// for `npu_run rdzv-server`.
struct RendezvousTiming {
  milliseconds join_timeout{900'000};  // to join (and re-join) a round
  // Elastic: how long a round with MIN (but not MAX) nodes waits for more.
  milliseconds last_call{30'000};
  milliseconds heartbeat_interval{5'000};
  milliseconds heartbeat_timeout{30'000};  // silence that counts as a lost peer
  milliseconds exit_barrier_timeout{300'000};
  milliseconds handshake_timeout{10'000};  // a new connection's hello, token proof and join
  int backlog = 0;                         // 0: net.core.somaxconn
};

// Where the rendezvous token comes from. Never logged, never given to workers; `source` says
// where it came from, for the log ("--rdzv-token-file /x").
struct NoToken {};
struct GivenToken {
  std::string value;
  std::string source;
};
// Inside a multi-node Slurm step without a token: derived from the user's secret for the job
// when the agent starts (agent/link/job_token.hpp), so that parsing creates no files.
struct DerivedToken {
  std::string secret_path;
  std::string job;
  std::string source;
};
using RendezvousToken = std::variant<NoToken, GivenToken, DerivedToken>;
// "" for no token.
std::string token_source(const RendezvousToken& token);

// Who serves the workers' store (MASTER_ADDR:MASTER_PORT, torch's TCPStore protocol).
enum class WorkerStore {
  kAgent,   // the rendezvous host serves it on --master-port (single node: the agent, on its port)
  kTiered,  // as kAgent, and each node's agent serves its own workers through a proxy to it
  kTorch,   // worker rank 0 hosts torch's own store on a port node 0's agent holds
};
// Whether npu_run serves the workers' store (every rank a client: TORCHELASTIC_USE_AGENT_STORE).
inline bool npu_run_serves_store(WorkerStore store) {
  return store != WorkerStore::kTorch;
}

// Where and how the agents of the job meet.
// --rdzv-backend etcd|etcd-v2 (agent/link/etcd_rendezvous.hpp): etcd elects the agent that hosts
// the rendezvous and keeps the job's memory, so the job survives the loss of any node.
struct EtcdSettings {
  std::string
      endpoints;       // checked: "h1:2379,https://h2:2379", https:// on each with protocol=https
  std::string prefix;  // the job's keys: <etcd_prefix>/<run id>
  std::string user;    // empty: no login
  // From NPU_RUN_ETCD_PASSWORD or --rdzv-conf password_file: never logged, never on a command
  // line; `password_source` says where it came from.
  std::string password;
  std::string password_source;
  milliseconds lease_ttl{5'000};
  milliseconds request_timeout{3'000};  // one request to one member
  // TLS for the https:// members (protocol=https makes every member one): torchrun's cacert,
  // cert and key files, absolute. An empty ca_file: the system's CA store.
  std::string ca_file;
  std::string cert_file;
  std::string key_file;
};

struct RendezvousConfig {
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;  // 0 (single-node only): a free port, chosen at launch
  // The port came from the user (option, PET_MASTER_PORT, --rdzv-endpoint, the scheduler), not
  // the default: a single node's store is then served there, as tcp://ADDR:PORT expects.
  bool master_port_chosen = false;
  std::optional<std::string> local_addr;  // the address peers use for this node
  std::string backend = "static";         // torchrun's --rdzv-backend, accepted and recorded
  std::map<std::string, std::string> conf;
  // --rdzv-conf is_host: true hosts the rendezvous whatever the node rank, false never does
  // (a server runs elsewhere); unset: node 0's agent hosts it.
  std::optional<bool> is_host;
  bool standalone = false;
  WorkerStore worker_store = WorkerStore::kAgent;
  std::string run_id = "none";
  RendezvousTiming timing;
  RendezvousToken token;
  std::optional<EtcdSettings> etcd;
};

// --rank-table auto: built through the rendezvous from every node's devices and addresses.
struct AutoRankTable {
  std::string hccn_conf;                // where the addresses came from
  std::vector<std::string> device_ips;  // address of each local rank's device
};
// --rank-table FILE: read and checked once, then matched against the assigned ranks.
struct GivenRankTable {
  std::string path;  // absolute
  RankTable table;
};

// Ascend: topology rules and the rank table.
struct AscendConfig {
  Soc soc = Soc::kNone;
  std::variant<std::monostate, AutoRankTable, GivenRankTable> rank_table;

  bool rank_table_auto() const { return std::holds_alternative<AutoRankTable>(rank_table); }
  const GivenRankTable* given_rank_table() const {
    return std::get_if<GivenRankTable>(&rank_table);
  }
  std::vector<std::string> device_ips() const;  // for the rendezvous: auto tables only
};

// Hung workers (--hang-timeout, --exit-timeout; agent/round/hang_watch.hpp).
struct HangPolicy {
  // --hang-timeout S: a worker that beat and then stays silent this long is hung. With
  // `learned` (--hang-timeout auto[:S]) it is the floor, and the timeout is learned_factor
  // times the longest silence between beats seen so far in the job, if that is longer.
  milliseconds timeout{0};
  bool learned = false;
  double learned_factor = 5.0;
  // --exit-timeout S: once every other local worker exited 0, one still running after S.
  std::optional<milliseconds> exit_timeout;
  bool enabled() const { return timeout.count() > 0; }  // the beat-based part
  bool any() const { return enabled() || exit_timeout.has_value(); }
};

// The ledger of bad nodes (cluster/node_ledger.hpp).
struct LedgerConfig {
  std::optional<std::string> path;  // --ledger, else <log dir>/ledger.jsonl; none: no ledger
  milliseconds ttl{86'400'000};     // --ledger-ttl
};

// Stopping and restarting workers.
struct SupervisionConfig {
  int max_restarts = 0;
  int max_no_progress_restarts = 0;   // 0: off (rdzv::JobSettings)
  milliseconds term_timeout{30'000};  // grace between SIGTERM and SIGKILL
  // A failure this soon after the start that says the script is broken as written (an
  // ImportError, a usage error) is deterministic: rdzv::FailureEvidence::early.
  milliseconds startup_window{60'000};
  // How long a device held by another program delays an attempt (agent/health/device_release.hpp).
  milliseconds device_release_timeout{30'000};
  std::vector<int> stop_signals;  // signals that stop the job (--signals-to-handle)
  // Started by a launcher (mpirun/orted, slurmstepd) that is the job's link to the scheduler:
  // if that process exits, stop as on SIGTERM rather than run on as an orphan.
  bool stop_with_parent = false;
  HangPolicy hang;
  // --auto-progress: Python workers beat once per optimizer step
  // (agent/rooms/python_hooks_room.cpp).
  bool auto_progress = true;
  LedgerConfig ledger;
  // --straggler, --straggler-window (agent/rooms/straggler_room.cpp,
  // rendezvous/state/straggler_desk.hpp).
  StragglerSettings straggler;
};

// Where workers' output goes.
// `npu_run msrun`'s files, as msrun names them (REFERENCE.md section 9): each worker's stdout
// and stderr in one `<dir>/<stem>_<global rank>.log`, the scheduler's in `<dir>/scheduler.log`;
// the first attempt starts them afresh, a restart adds to them.
struct MsrunLogs {
  std::string dir;                             // --log_dir ("": the working directory)
  std::string stem = "worker";                 // --worker_log_name, {ip} {hostname} expanded
  std::optional<std::set<int>> console_ranks;  // --tail_worker_log; nullopt: every rank
  bool console = true;                         // false: --join False, no terminal to write to
};

struct OutputConfig {
  std::optional<std::string> log_dir;
  bool log_dir_is_temporary = false;  // -r/-t or filters asked for files without --log-dir
  RankStreamMap redirects;
  RankStreamMap tee;
  std::optional<std::set<int>> local_ranks_filter;
  std::optional<std::string> prefix_template;  // set: console lines pass through the agent
  // torchrun 2.x's --duplicate-*-filters: console-bound lines containing any of these are also
  // copied to attempt_<n>/filtered_{stdout,stderr}.log.
  std::vector<std::string> stdout_filters;
  std::vector<std::string> stderr_filters;
  std::optional<MsrunLogs> msrun_logs;  // set by `npu_run msrun` only
};

// What the job leaves to look at (--timeline, --report, --metrics-port).
struct RecordsConfig {
  std::optional<std::string> timeline_file;  // --timeline; else the run directory's, with --log-dir
  bool report = false;                       // report.html beside the timeline
  std::string metrics_addr = "0.0.0.0";      // --metrics-port [ADDR:]PORT
  int metrics_port = 0;                      // 0: no metrics
};

// Snapshots in the agents' memory (npu_run_checkpoint, agent/rooms/snapshot_room.cpp).
struct SnapshotConfig {
  // --checkpoint-memory: the node's budget for its ranks' snapshots, `bytes` when given, else
  // `share` of MemAvailable at the agent's start; never more than the shared-memory file system
  // has free. 0 bytes: every save goes to storage directly.
  std::optional<uint64_t> bytes;
  double share = 0.3;
  int keep = 0;  // --checkpoint-keep: each rank's newest files kept on storage; 0: all
};

// How the agent itself behaves.
struct AgentOptions {
  std::string log_level = "info";
  bool dry_run = false;
  bool json = false;
};

struct LaunchConfig {
  WorkerCommand worker;
  JobShape shape;
  Placement placement;
  RendezvousConfig rendezvous;
  AscendConfig ascend;
  HealthGateSettings health;
  SupervisionConfig supervision;
  OutputConfig output;
  RecordsConfig records;
  SnapshotConfig snapshots;
  AgentOptions agent;

  // Every node's device counts and addresses are needed (topology rules, generated rank tables,
  // the TF Adapter's chief device on node 0).
  bool wants_peers() const {
    return ascend.soc != Soc::kNone || ascend.rank_table_auto() ||
           (worker.framework == Framework::kTensorFlow && worker.tf_cluster == TfCluster::kEnv);
  }
};

}  // namespace npu_run
