// The option table of `npu_run [OPTIONS] SCRIPT [ARGS...]`: every torchrun flag in both
// spellings with its PET_<NAME> variable, and the raw values CLI11 fills. The resolvers
// (cli/resolve_*.cpp) turn them into a LaunchConfig.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "cli/cli11_fwd.hpp"
#include "cli/option_names.hpp"
#include "cli/rendezvous_options.hpp"

namespace npu_run {

// --hosts/--hostfile: the launching npu_run starts one agent per host over ssh.
struct HostsFlags {
  std::string hosts;
  std::string hostfile;
  std::string include;
  std::string exclude;
  int ssh_port = 0;  // 0: ssh's own choice (~/.ssh/config, else 22)
  std::vector<std::string> ssh_options;
  std::vector<std::string> env;
  std::vector<std::string> env_files;
  bool ship_binary = false;
  int ssh_fanout = 32;
  bool ssh_tree = false;
};

// Raw values as CLI11 fills them; the defaults are torchrun's.
struct LaunchFlags {
  HostsFlags hosts;
  RendezvousFlags rdzv;
  std::string nproc_per_node = "1";
  int node_rank = 0;
  std::string master_addr = "127.0.0.1";
  int master_port = 29500;
  std::string local_addr;
  std::string rdzv_backend = "static";
  std::string rdzv_endpoint;
  std::string rdzv_conf;
  bool standalone = false;
  double monitor_interval = 0.1;
  std::string start_method = "spawn";
  std::string role = "default";
  bool module = false;
  bool no_python = false;
  bool run_path = false;
  bool virtual_local_rank = false;
  std::string numa_binding;
  std::string event_log_handler = "null";
  std::string logs_specs;
  std::string log_dir;
  std::string redirects = "0";
  std::string tee = "0";
  std::string local_ranks_filter;
  std::string prefix_template;
  std::string stdout_filters;
  std::string stderr_filters;
  double term_timeout = 30.0;
  std::string hang_timeout;
  double exit_timeout = 0;
  int max_no_progress_restarts = 0;
  std::string signals_to_handle = "SIGTERM,SIGINT,SIGHUP,SIGQUIT";
  std::string devices;
  std::string log_level = "info";
  bool dry_run = false;
  bool json = false;
  std::string soc = "none";
  std::string rank_table;
  std::string hccn_conf;
  std::string cluster = "auto";
  int agents_per_node = 1;
  std::string worker_store = "agent";
};

// The table, its values, and how each option is named.
class LaunchOptions {
 public:
  LaunchOptions();
  ~LaunchOptions();
  LaunchOptions(const LaunchOptions&) = delete;
  LaunchOptions& operator=(const LaunchOptions&) = delete;

  CLI::App& app() { return *app_; }
  const CLI::App& app() const { return *app_; }
  const LaunchFlags& flags() const { return flags_; }
  OptionNames& names() { return names_; }
  const OptionNames& names() const { return names_; }
  std::string source(const CLI::Option* option) const { return names_.source(option); }
  // CLI11's message for options given together that exclude each other, with the reason.
  std::string exclusion_reason(const std::string& clash) const;
  // --hosts or --hostfile was given: this npu_run starts the job's agents over ssh.
  bool launches_hosts() const;

  RendezvousOptions rdzv;
  CLI::Option *nproc, *devices, *node_rank, *master_addr, *master_port, *local_addr, *rdzv_backend,
      *rdzv_endpoint, *rdzv_conf, *standalone, *role, *module, *no_python, *run_path, *start_method,
      *monitor_interval, *term_timeout, *signals, *log_dir, *redirects, *tee, *filter, *prefix,
      *log_level, *dry_run, *json, *soc, *rank_table, *hccn_conf, *cluster, *agents_per_node,
      *virtual_local_rank, *event_log_handler, *logs_specs, *stdout_filters, *stderr_filters,
      *numa_binding, *worker_store, *hang_timeout, *exit_timeout, *max_no_progress_restarts;
  // The options of a launch over ssh, which only the launching npu_run reads.
  struct HostOptions {
    CLI::Option *hosts, *hostfile, *include, *exclude, *ssh_port, *ssh_option, *env, *env_file,
        *ship_binary, *ssh_fanout, *ssh_tree;
  } host_options{};

 private:
  void add_shape(const char* shape);
  void add_what_runs(const char* what);
  void add_supervision_and_output(const char* supervise, const char* logs);
  void add_ascend_and_agent(const char* ascend, const char* agent);
  void add_hosts(const char* group);
  // "--a-b" and "--a_b" (and `also`, more names) with PET_A_B.
  template <typename T>
  CLI::Option* add(const std::string& dashed, T& target, const std::string& help, const char* group,
                   const std::string& also = "");
  CLI::Option* add_flag(const std::string& dashed, bool& target, const std::string& help,
                        const char* group, const std::string& also = "");

  std::unique_ptr<CLI::App> app_;
  LaunchFlags flags_;
  OptionNames names_;
};

}  // namespace npu_run
