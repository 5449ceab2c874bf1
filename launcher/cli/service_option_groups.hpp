// The option groups of what surrounds the workers (cli/option_groups.hpp has the job's: its
// rendezvous, shape, workers and supervision): their output, the job's records, Ascend's rank
// table, the health gate, the agent itself, a launch over ssh, and `npu_run rdzv-server`. Each
// option is declared once, as a Flag member of its --help group (cli/option_set.hpp).
#pragma once

#include <string>
#include <vector>

#include "cli/option_set.hpp"
#include "cli/value_parsers.hpp"

namespace npu_run {

struct OutputFlags : FlagGroup {
  explicit OutputFlags(OptionSet& set) : FlagGroup(set, "Worker output") {}

  Flag<std::string> log_dir{
      *this,
      {.name = "--log-dir",
       .help = "Each run gets <dir>/<run_id>_XXXXXX/attempt_<n>/<local_rank>/ with error files, "
               "and {stdout,stderr}.log for the streams -r/-t name",
       .type = "DIR"}};
  Flag<std::string> redirects{
      *this,
      {.name = "--redirects",
       .help = "Streams sent only to log files: 0 none, 1 stdout, 2 stderr, 3 both, or per local "
               "rank like 0:3,12:1",
       .also = "-r"},
      "0"};
  Flag<std::string> tee{*this,
                        {.name = "--tee",
                         .help = "Streams written to log files and the console (same syntax as -r)",
                         .also = "-t"},
                        "0"};
  Flag<std::string> local_ranks_filter{
      *this,
      {.name = "--local-ranks-filter",
       .help = "Only these local ranks reach the console, e.g. 0 or 0,1 (others: log files or "
               "nothing)"}};
  Flag<std::string> stdout_filters{
      *this,
      {.name = "--duplicate-stdout-filters",
       .help = "Copy the console-bound stdout lines that contain any of these strings "
               "(comma-separated; ',,' is a comma) to attempt_<n>/filtered_stdout.log in the "
               "run's log directory (torchrun 2.x)",
       .type = "TEXT,..."}};
  Flag<std::string> stderr_filters{
      *this,
      {.name = "--duplicate-stderr-filters",
       .help = "The same for stderr lines, into attempt_<n>/filtered_stderr.log",
       .type = "TEXT,..."}};
  Flag<std::string> event_log_handler{
      *this,
      {.name = "--event-log-handler",
       .help = "Accepted for torchrun 2.x compatibility; npu_run has no event handlers: its log "
               "lines record the job's events"},
      "null"};
  Flag<std::string> logs_specs{
      *this,
      {.name = "--logs-specs",
       .help = "Accepted for torchrun 2.x compatibility; npu_run loads no logging plugins: "
               "--log-dir, -r and -t choose the files"}};
  // A launch over ssh puts each host's name before the user's template.
  Flag<std::string> prefix_template{
      *this,
      {.name = "--log-line-prefix-template",
       .help = "Prefix of relayed console lines; ${rank} ${local_rank} ${node_rank} ${role_name} "
               "${host} (default '[${role_name}${local_rank}]:' when teeing, as torchrun; '' for "
               "none; also TORCHELASTIC_LOG_LINE_PREFIX_TEMPLATE)",
       .reach = Reach::kLauncher}};
};

// What the job leaves to look at: its timeline, a report, and metrics while it runs.
struct RecordFlags : FlagGroup {
  explicit RecordFlags(OptionSet& set) : FlagGroup(set, "Timeline, report and metrics") {}

  Flag<std::string> timeline{
      *this,
      {.name = "--timeline",
       .help = "Node 0 writes the job's timeline (every node's phases and beats, with wall times, "
               "and where each round's start went) to FILE at the end (default: timeline.json in "
               "the run's directory under --log-dir; without --log-dir, none)",
       .type = "FILE"}};
  Flag<bool> report{
      *this,
      {.name = "--report",
       .help = "Node 0 also writes report.html beside the timeline: one self-contained page (no "
               "network) of the rounds, beats, failures and goodput; npu_run report RUN_DIR makes "
               "it later"}};
  Flag<std::string> metrics_port{
      *this,
      {.name = "--metrics-port",
       .help = "Serve Prometheus metrics (rounds, restarts, phases, beats, workers, the "
               "rendezvous and the store) on http://HOST:PORT/metrics from every agent",
       .type = "[ADDR:]PORT"}};
};

struct SnapshotFlags : FlagGroup {
  explicit SnapshotFlags(OptionSet& set) : FlagGroup(set, "Snapshots in memory") {}

  Flag<std::string> memory{
      *this,
      {.name = "--checkpoint-memory",
       .help = "The memory each node gives its ranks' npu_run_checkpoint snapshots (two per rank "
               "at most), as SIZE (4G, 512M) or a share of MemAvailable (30%, the default); a "
               "save that does not fit goes to storage directly. 0: every save does",
       .type = "SIZE|N%"},
      "30%"};
  Flag<int> keep{*this,
                 {.name = "--checkpoint-keep",
                  .help = "Each rank's newest K files that npu_run_checkpoint wrote are kept on "
                          "storage, older ones deleted; 0, the default, keeps every file",
                  .type = "K"}};
};

struct AscendFlags : FlagGroup {
  explicit AscendFlags(OptionSet& set) : FlagGroup(set, "Ascend") {}

  Flag<std::string> soc{
      *this,
      {.name = "--soc",
       .help = "Enforce the device topology rules of a server series: atlas-training, atlas-a2, "
               "atlas-a3, none (default)",
       .type = "{atlas-training,atlas-a2,atlas-a3,none}"},
      "none"};
  Flag<std::string> rank_table{
      *this,
      {.name = "--rank-table",
       .help = "HCCL rank table: a file to check against the job and export as RANK_TABLE_FILE, "
               "or auto to build one through the rendezvous",
       .type = "FILE"}};
  Flag<std::string> hccn_conf{
      *this,
      {.name = "--hccn-conf",
       .help = "Device addresses for --rank-table auto (default $NPU_RUN_HCCN_CONF, else "
               "/etc/hccn.conf)",
       .type = "FILE"}};
};

// The health gate (issue 29): each node's checks before every round, and what a failure does.
struct HealthFlags : FlagGroup {
  explicit HealthFlags(OptionSet& set) : FlagGroup(set, "Health gate") {}

  Flag<std::string> health_check{
      *this,
      {.name = "--health-check",
       .help = "Before every round each node checks its NPUs (npu-smi), links (hccn_tool), GPUs "
               "(nvidia-smi) and runs --health-check-cmd: gate stops a static job (exit 122) and "
               "keeps a failing node out of an elastic one; warn only logs; off. Default auto: "
               "gate where a tool or --health-check-cmd exists, else off",
       .type = "{auto,gate,warn,off}"},
      "auto"};
  Flag<std::string> health_check_cmd{
      *this,
      {.name = "--health-check-cmd",
       .help = "A command (sh -c) every node runs with its checks: exit 0 passes, otherwise its "
               "last output line is the reason",
       .type = "CMD"}};
  Flag<std::string> health_timeout{
      *this,
      {.name = "--health-timeout",
       .help = "Seconds for a node's checks, and for each tool call (hccn_tool can block for "
               "minutes); what they cut off is reported as not run (default 60,15)",
       .type = "S[,CALL_S]"},
      "60,15"};
  Flag<double> health_recheck{
      *this,
      {.name = "--health-recheck",
       .help = "An elastic job: a node that failed its checks runs them again every S seconds, "
               "and rejoins once they pass (default 30)",
       .type = "S"},
      30.0};
  Flag<int> health_flap_window{
      *this,
      {.name = "--health-flap-window",
       .help = "Warn of a device link that went down in the last MIN minutes (default 10)",
       .type = "MIN"},
      10};
  Flag<std::string> health_failed_hosts{
      *this,
      {.name = "--health-failed-hosts",
       .help = "When the gate stops the job, each node that failed it appends its name "
               "($SLURMD_NODENAME, else its host name) to FILE: what a requeue excludes",
       .type = "FILE"}};
  Flag<std::string> preflight{
      *this,
      {.name = "--preflight",
       .help = "Before the first round, and before a round with a node not probed yet, every "
               "node runs a short torch benchmark: a matmul, then an all_gather with another "
               "node (full: bigger, then the whole group). A node or pair over twice the median "
               "fails its health gate, named with its figures (default off)",
       .type = "{off,quick,full}"},
      "off"};
  Flag<bool> strict_consistency{
      *this,
      {.name = "--strict-consistency",
       .help = "Settings that must agree on every node (HCCL_*, versions, the script's hash) fail "
               "the nodes that differ, instead of a warning"}};
};

struct AgentFlags : FlagGroup {
  explicit AgentFlags(OptionSet& set) : FlagGroup(set, "Agent") {}

  Flag<std::string> log_level{
      *this,
      {.name = "--log-level",
       .help = "Agent log level: trace, debug, info, warn, error, critical, off",
       .type = kLogLevelChoices},
      "info"};
  // The launcher of a launch over ssh plans (or runs) every host itself.
  Flag<bool> dry_run{
      *this,
      {.name = "--dry-run",
       .help = "Print the resolved plan (nodes, ranks, commands, environment) and exit",
       .reach = Reach::kLauncher}};
  Flag<bool> json{*this,
                  {.name = "--json",
                   .help = "With --dry-run: print the plan as JSON",
                   .reach = Reach::kLauncher}};
  // torchrun 2.14's spelling of `npu_run completion SHELL`.
  Flag<std::string> print_completion{
      *this,
      {.name = "--print-completion",
       .help = "Print the completion script for this shell and exit (as torchrun 2.14; also "
               "npu_run completion SHELL)",
       .type = "{bash,zsh,tcsh}",
       .variable = kNoVariable,
       .reach = Reach::kLauncher}};
};

// --hosts/--hostfile: the launching npu_run starts one agent per host over ssh. Read by the
// launcher only; none has a PET_ variable (torchrun has no such options).
struct HostsFlags : FlagGroup {
  explicit HostsFlags(OptionSet& set) : FlagGroup(set, "Many hosts (ssh)") {}

  static constexpr OptionRow own(OptionRow row) {
    row.variable = kNoVariable;
    row.reach = Reach::kLauncher;
    return row;
  }

  Flag<std::string> hosts{
      *this,
      own({.name = "--hosts",
           .help = "Start the job on these hosts over ssh, one agent each: HOST[:SLOTS],... "
                   "(horovodrun's -H; Slurm hostlists such as node[01-04]:8); the first is node "
                   "0. SLOTS sets the host's workers (default --nproc-per-node)",
           .type = "HOSTS"})};
  Flag<std::string> hostfile{
      *this, own({.name = "--hostfile",
                  .help = "As --hosts, from a DeepSpeed hostfile: 'HOST slots=N' lines, # comments",
                  .type = "FILE"})};
  Flag<std::string> include{
      *this,
      own({.name = "--include",
           .help = "Use only these hosts or devices: HOST[:SLOT,...]@HOST... (DeepSpeed's syntax)",
           .type = "FILTER"})};
  Flag<std::string> exclude{
      *this, own({.name = "--exclude",
                  .help = "Leave out these hosts or devices: HOST[:SLOT,...]@HOST...",
                  .type = "FILTER"})};
  Flag<int> ssh_port{
      *this, own({.name = "--ssh-port", .help = "ssh's -p for every host (default: ssh's)"})};
  Flag<std::vector<std::string>> ssh_options{
      *this,
      own({.name = "--ssh-option",
           .help = "ssh's -o OPTION=VALUE for every host; repeatable (~/.ssh/config applies too)",
           .type = "OPT=VALUE"})};
  Flag<std::vector<std::string>> env{
      *this, own({.name = "--env",
                  .help = "Pass this variable to every host: NAME (its value here) or NAME=VALUE; "
                          "repeatable. PATH, PYTHONPATH, PYTHON_EXEC and NPU_RUN_* pass by default",
                  .type = "NAME[=VALUE]"})};
  Flag<std::vector<std::string>> env_files{
      *this, own({.name = "--env-file",
                  .help = "NAME=VALUE lines passed to every host, as DeepSpeed's .deepspeed_env "
                          "(default: .npu_run_env here, then in $HOME, if present); repeatable",
                  .type = "FILE"})};
  Flag<bool> ship_binary{
      *this,
      own({.name = "--ship-binary",
           .help = "Copy this npu_run to each host first (~/.cache/npu_run), instead of running "
                   "the same path there"})};
  Flag<int> ssh_fanout{*this,
                       own({.name = "--ssh-fanout",
                            .help = "ssh connections being opened at once (default 32, as pdsh)"}),
                       32};
  Flag<bool> ssh_tree{
      *this,
      own({.name = "--ssh-tree",
           .help = "Where hosts can ssh to each other: each host started here starts others in "
                   "turn, --ssh-fanout at a time (1,000 hosts in 2 rounds)"})};
};

// `npu_run rdzv-server`'s own; no PET_ variables (torchrun has no such command).
struct ServerFlags : FlagGroup {
  explicit ServerFlags(OptionSet& set) : FlagGroup(set, "Options", false) {}

  Flag<int> port{
      *this,
      {.name = "--port", .help = "Port to listen on", .also = "--master-port,--master_port"},
      29500};
  Flag<std::string> host{
      *this,
      {.name = "--host", .help = "Address to listen on (default 0.0.0.0: every IPv4 address)"},
      "0.0.0.0"};
  Flag<std::string> log_level{
      *this, {.name = "--log-level", .help = "Log level", .type = kLogLevelChoices}, "info"};
};

}  // namespace npu_run
