// --hosts/--hostfile: the launch over ssh, resolved from the same option table as an agent's.
// The launcher checks what is its own (hosts, slots, filters, ssh, variables, the token) and
// hands every other option to the agents as given: each host resolves them against its own
// devices, files and programs, and says what is wrong there.
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <set>

#include "basics/env_file.hpp"
#include "basics/text.hpp"
#include "basics/token_file.hpp"
#include "basics/usage_error.hpp"
#include "cli/resolvers.hpp"
#include "cli/value_parsers.hpp"

namespace npu_run {

namespace {

constexpr size_t kMaxListFile = size_t{16} << 20;  // a hostfile or env file: 16 MiB at most
constexpr const char* kEnvFileName = ".npu_run_env";

std::vector<HostSlots> read_hosts(const LaunchOptions& o, HostProbe& host) {
  const HostsFlags& f = o.flags().hosts;
  const auto& h = o.host_options;
  if (h.hosts->count() > 0 && h.hostfile->count() > 0)
    throw UsageError("--hosts and --hostfile both name the job's hosts; give one of them");
  if (h.hosts->count() > 0) return parse_hosts_list(f.hosts, "--hosts");
  return parse_hostfile(host.read_text(f.hostfile, "--hostfile", kMaxListFile), f.hostfile);
}

// A host's own slot count decides its workers; a different --nproc-per-node is a mistake to
// point out, not to guess between.
void check_slots_against_nproc(const std::vector<HostSlots>& hosts, const LaunchOptions& o,
                               std::optional<int> numeric_nproc) {
  if (!OptionNames::given(o.nproc) || !numeric_nproc) return;
  for (const HostSlots& host : hosts) {
    if (host.slots && host.devices.empty() && *host.slots != *numeric_nproc) {
      throw UsageError(fmt::format(
          "{} {} but host '{}' has {} slots ({}); drop one of them, or pick devices with "
          "--include {}:0,1,...",
          o.source(o.nproc), *numeric_nproc, host.name, *host.slots, host.origin, host.name));
    }
  }
}

void refuse_per_host_options(const LaunchOptions& o, size_t host_count) {
  for (const CLI::Option* option : {o.node_rank, o.standalone}) {
    if (OptionNames::given(option)) {
      throw UsageError(fmt::format(
          "{} cannot be given with --hosts/--hostfile: the launcher gives each host its node "
          "rank (the first host is node 0); drop it",
          o.source(option)));
    }
  }
  if (OptionNames::given(o.rdzv.nnodes)) {
    const auto [min_nodes, max_nodes] =
        parse_nnodes(o.flags().rdzv.nnodes, o.source(o.rdzv.nnodes));
    (void)min_nodes;
    if (static_cast<size_t>(max_nodes) != host_count) {
      throw UsageError(fmt::format("{} {} but {} host{} named; drop {} (the hosts decide it)",
                                   o.source(o.rdzv.nnodes), o.flags().rdzv.nnodes, host_count,
                                   host_count == 1 ? " is" : "s are", o.source(o.rdzv.nnodes)));
    }
  }
}

void add_variable(std::vector<PassedVariable>& env, std::string name, std::string value,
                  std::string source) {
  for (PassedVariable& v : env) {
    if (v.name == name) {
      v.value = std::move(value);
      v.source = std::move(source);
      return;
    }
  }
  env.push_back({std::move(name), std::move(value), std::move(source)});
}

// Defaults, then env files, then --env: the later wins.
std::vector<PassedVariable> passed_variables(const LaunchOptions& o, const EnvMap& env,
                                             HostProbe& host) {
  std::vector<PassedVariable> passed;
  for (const auto& [name, value] : env) {
    const bool ours = name.rfind("NPU_RUN_", 0) == 0 && name != kTokenVariable;
    if (ours || name == "PATH" || name == "PYTHONPATH" || name == "PYTHON_EXEC")
      add_variable(passed, name, value, "default");
  }
  std::vector<std::string> files = o.flags().hosts.env_files;
  if (files.empty()) {
    // DeepSpeed's rule for .deepspeed_env: the home directory's, then the working directory's.
    if (const auto home = lookup(env, "HOME")) files.push_back(*home + "/" + kEnvFileName);
    files.push_back(host.working_directory() + "/" + kEnvFileName);
    std::erase_if(files, [&](const std::string& f) { return !host.is_regular_file(f); });
    if (files.size() == 2 && host.absolute(files[0]) == host.absolute(files[1])) files.pop_back();
  }
  for (const std::string& file : files) {
    int n = 0;
    for (auto& [name, value] :
         parse_env_file(host.read_text(file, "--env-file", kMaxListFile), file)) {
      add_variable(passed, name, value, fmt::format("{} ({})", file, ++n));
    }
  }
  for (const std::string& item : o.flags().hosts.env) {
    const size_t equals = item.find('=');
    const std::string name = item.substr(0, equals);
    if (!is_variable_name(name)) {
      throw UsageError(fmt::format("--env '{}': expected NAME or NAME=VALUE, NAME a variable name",
                                   printable(item)));
    }
    if (name == kTokenVariable) {
      throw UsageError(
          fmt::format("--env {}: the token reaches the hosts by itself (through "
                      "ssh's stdin, never a command line); drop this --env",
                      name));
    }
    if (equals != std::string::npos) {
      add_variable(passed, name, item.substr(equals + 1), "--env");
    } else if (const auto value = lookup(env, name)) {
      add_variable(passed, name, *value, "--env");
    } else {
      throw UsageError(
          fmt::format("--env {}: {} is not set here; export it first, or give --env {}=VALUE", name,
                      name, name));
    }
  }
  return passed;
}

// Options the launcher sets per host or keeps for itself.
bool launcher_only(const LaunchOptions& o, const CLI::Option* option) {
  const auto& h = o.host_options;
  for (const CLI::Option* own :
       {h.hosts, h.hostfile, h.include, h.exclude, h.ssh_port, h.ssh_option, h.env, h.env_file,
        h.ship_binary, h.ssh_fanout, h.ssh_tree, o.nproc, o.dry_run, o.json, o.rdzv.token,
        o.rdzv.token_file, o.prefix}) {
    if (option == own) return true;
  }
  return false;
}

// Every option given here (typed or from its PET_ variable), written out for the agents'
// command line: "--name=value", a flag as "--name".
std::vector<std::string> forwarded_options(const LaunchOptions& o) {
  std::vector<std::string> args;
  for (const CLI::Option* option : o.app().get_options()) {
    if (option->count() == 0 || option->get_lnames().empty() || launcher_only(o, option)) continue;
    const std::string name = "--" + option->get_lnames().front();
    if (option->get_expected_max() == 0) {
      if (option->as<bool>()) args.push_back(name);
      continue;
    }
    const auto& results = option->results();
    if (option->get_multi_option_policy() == CLI::MultiOptionPolicy::TakeAll) {
      for (const std::string& r : results) args.push_back(name + "=" + r);
    } else {
      args.push_back(name + "=" + results.back());
    }
  }
  if (!OptionNames::given(o.cluster)) args.emplace_back("--cluster=none");
  return args;
}

}  // namespace

HostsLaunch resolve_hosts(const LaunchOptions& o, const std::vector<std::string>& script_and_args,
                          const EnvMap& env, HostProbe& host) {
  const LaunchFlags& f = o.flags();
  HostsLaunch launch;
  launch.nproc_per_node = f.nproc_per_node;
  std::optional<int> numeric_nproc;
  if (const auto n = parse_integer(f.nproc_per_node, 1, kMaxWorkersPerNode))
    numeric_nproc = static_cast<int>(*n);
  launch.hosts = filter_hosts(read_hosts(o, host), f.hosts.include, f.hosts.exclude, numeric_nproc);
  check_slots_against_nproc(launch.hosts, o, numeric_nproc);
  refuse_per_host_options(o, launch.hosts.size());
  for (const HostSlots& h : launch.hosts) {
    if (OptionNames::given(o.devices) && !h.devices.empty()) {
      throw UsageError(
          fmt::format("{} and --include/--exclude both pick host '{}''s devices; "
                      "use one of them",
                      o.source(o.devices), h.name));
    }
  }
  if (f.hosts.ssh_fanout < 1 || f.hosts.ssh_fanout > 1024) {
    throw UsageError(
        fmt::format("--ssh-fanout {}: expected 1 to 1024 connections at once", f.hosts.ssh_fanout));
  }
  if (OptionNames::given(o.host_options.ssh_port) &&
      (f.hosts.ssh_port < 1 || f.hosts.ssh_port > 65535)) {
    throw UsageError(fmt::format("--ssh-port {}: expected 1 to 65535", f.hosts.ssh_port));
  }
  for (const std::string& option : f.hosts.ssh_options) {
    if (option.find('=') == std::string::npos || option.front() == '-') {
      throw UsageError(
          fmt::format("--ssh-option '{}': expected OPTION=VALUE as ssh's -o takes it (e.g. "
                      "--ssh-option IdentityFile=~/.ssh/cluster)",
                      printable(option)));
    }
  }
  launch.ssh.program = lookup(env, "NPU_RUN_SSH").value_or("ssh");
  if (host.find_program(launch.ssh.program).empty()) {
    throw UsageError(
        fmt::format("ssh ('{}') is not on PATH here; install OpenSSH's client, or "
                    "name it with NPU_RUN_SSH",
                    launch.ssh.program));
  }
  if (OptionNames::given(o.host_options.ssh_port)) launch.ssh.port = f.hosts.ssh_port;
  launch.ssh.options = f.hosts.ssh_options;
  launch.ssh.fanout = f.hosts.ssh_fanout;
  launch.ssh.tree = f.hosts.ssh_tree;
  launch.ssh.ship_binary = f.hosts.ship_binary;
  launch.env = passed_variables(o, env, host);
  launch.working_directory = host.working_directory();
  launch.agent_options = forwarded_options(o);
  launch.script_and_args = script_and_args;
  launch.rendezvous_given =
      OptionNames::given(o.master_addr) || OptionNames::given(o.rdzv_endpoint);
  if (OptionNames::given(o.master_addr)) launch.master_addr = f.master_addr;
  launch.master_port = f.master_port;
  if (OptionNames::given(o.prefix)) launch.prefix_template = f.prefix_template;
  if (auto given = resolve_given_token(f.rdzv, o.rdzv, o.names(), host)) launch.token = *given;
  launch.agent.log_level = f.log_level;
  launch.agent.dry_run = f.dry_run;
  launch.agent.json = f.json;
  return launch;
}

}  // namespace npu_run
