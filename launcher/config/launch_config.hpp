// LaunchConfig: everything the command line and PET_* environment asked for, validated once.
// Nothing downstream re-parses flags; later stages only read this.
#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "ascend/topology.hpp"
#include "config/rank_stream_map.hpp"

namespace npu_run {

enum class WorkerMode {
  kPythonScript,  // $PYTHON_EXEC -u SCRIPT ARGS
  kPythonModule,  // $PYTHON_EXEC -u -m MODULE ARGS
  kExecutable,    // --no-python: SCRIPT ARGS
};

struct LaunchConfig {
  // What each worker runs.
  WorkerMode mode = WorkerMode::kPythonScript;
  std::string entrypoint;         // script, module, or executable as the user wrote it
  std::vector<std::string> args;  // the user's arguments after it (before ${local_rank} expansion)
  std::string program;            // absolute path of the file exec'd: python or the executable

  // Shape of the job.
  int nproc_per_node = 1;
  std::vector<int> devices;    // physical device id of each local rank
  std::string devices_source;  // "default", "--devices", or what discovery found
  Soc soc = Soc::kNone;        // topology rules to enforce
  // --rank-table: "auto" (built through the rendezvous), a file, or unset.
  std::optional<std::string> rank_table;
  std::string hccn_conf;                // where --rank-table auto reads device addresses
  std::vector<std::string> device_ips;  // --rank-table auto: address of each local rank's device
  int min_nodes = 1;
  int max_nodes = 1;
  std::optional<int> node_rank;  // unset: assigned by the rendezvous
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  std::optional<std::string> local_addr;
  std::string rdzv_backend = "static";
  std::map<std::string, std::string> rdzv_conf;
  bool standalone = false;
  int agents_per_node = 1;                    // --agents-per-node
  std::string cluster_description;            // "Slurm job 12 step 0"; empty: none detected
  std::vector<std::string> cluster_detected;  // values taken from it, logged once
  std::vector<std::string> cluster_warnings;
  // Started by a launcher (mpirun/orted, slurmstepd) that is the job's link to the scheduler:
  // if that process exits, stop as on SIGTERM rather than run on as an orphan.
  bool stop_with_parent = false;
  std::chrono::milliseconds rdzv_timeout{900'000};  // to join (and re-join) a round
  // Elastic: how long a round with MIN (but not MAX) nodes waits for more.
  std::chrono::milliseconds rdzv_last_call{30'000};
  int rdzv_backlog = 0;  // 0: net.core.somaxconn
  std::chrono::milliseconds heartbeat_interval{5'000};
  std::chrono::milliseconds heartbeat_timeout{30'000};  // silence that counts as a lost peer
  std::chrono::milliseconds exit_barrier_timeout{300'000};
  // rdzv-conf read_timeout: a new rendezvous connection must finish its handshake within this.
  std::chrono::milliseconds rdzv_handshake_timeout{10'000};
  std::string run_id = "none";
  std::string role = "default";
  // The rendezvous token (rdzv_token.hpp); empty: none. Never logged, never given to workers.
  std::string rdzv_token;
  std::string rdzv_token_source;  // where it came from, for the log: "--rdzv-token-file /x"
  // Inside a Slurm step without a token: derive_job_token(secret, job) when the agent starts.
  std::string rdzv_token_secret;
  std::string rdzv_token_job;

  // Supervision.
  int max_restarts = 0;
  std::chrono::milliseconds term_timeout{30'000};  // grace between SIGTERM and SIGKILL
  std::vector<int> stop_signals;  // signals that stop the job (--signals-to-handle)

  bool multi_node() const { return max_nodes > 1; }
  bool rank_table_auto() const { return rank_table && *rank_table == "auto"; }
  // Every node's device counts and addresses are needed (topology rules, generated rank tables).
  bool wants_peers() const { return soc != Soc::kNone || rank_table_auto(); }

  // Output of workers.
  std::optional<std::string> log_dir;
  bool log_dir_is_temporary = false;  // created because -r/-t asked for files without --log-dir
  RankStreamMap redirects;
  RankStreamMap tee;
  std::optional<std::set<int>> local_ranks_filter;
  std::optional<std::string> prefix_template;  // set: console lines pass through the agent

  // Agent behaviour.
  std::string log_level = "info";
  bool dry_run = false;
  bool json = false;
};

// The text shown after a usage error and in --help; also used by tests.
std::string worker_mode_name(WorkerMode mode);

}  // namespace npu_run
