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
#include "cluster/node_ledger.hpp"

namespace npu_run {

namespace {

constexpr size_t kMaxListFile = size_t{16} << 20;  // a hostfile or env file: 16 MiB at most
constexpr const char* kEnvFileName = ".npu_run_env";

std::vector<HostSlots> read_hosts(const HostsFlags& f, HostProbe& host) {
  if (f.hosts.given() && f.hostfile.given())
    throw UsageError("--hosts and --hostfile both name the job's hosts; give one of them");
  if (f.hosts.given()) return parse_hosts_list(*f.hosts, "--hosts");
  return parse_hostfile(host.read_text(*f.hostfile, "--hostfile", kMaxListFile), *f.hostfile);
}

// A host's own slot count decides its workers; a different --nproc-per-node is a mistake to
// point out, not to guess between.
void check_slots_against_nproc(const std::vector<HostSlots>& hosts, const LaunchOptions& o,
                               std::optional<int> numeric_nproc) {
  if (!o.shape.nproc_per_node.given() || !numeric_nproc) return;
  for (const HostSlots& host : hosts) {
    if (host.slots && host.devices.empty() && *host.slots != *numeric_nproc) {
      throw UsageError(fmt::format(
          "{} {} but host '{}' has {} slots ({}); drop one of them, or pick devices with "
          "--include {}:0,1,...",
          o.shape.nproc_per_node.source(), *numeric_nproc, host.name, *host.slots, host.origin,
          host.name));
    }
  }
}

// The hosts the ledger of bad nodes (--ledger, or the --log-dir's) keeps out, each with its
// entry; they are taken off `hosts`.
std::vector<std::string> skip_ledgered(std::vector<HostSlots>& hosts, const LaunchOptions& o,
                                       HostProbe& host) {
  const std::string path = !o.supervision.ledger->empty() ? *o.supervision.ledger
                           : !o.output.log_dir->empty()   ? *o.output.log_dir + "/ledger.jsonl"
                                                          : std::string();
  if (path.empty() || !host.is_regular_file(path)) return {};
  const auto now_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                          std::chrono::system_clock::now().time_since_epoch())
                          .count();
  const auto ttl_ms = static_cast<int64_t>(*o.supervision.ledger_ttl * 1000);
  const std::vector<LedgerEntry> active = active_entries(
      ledger_entries(host.read_text(path, "--ledger", kMaxLedgerBytes)), now_ms, ttl_ms);
  std::vector<std::string> skipped;
  std::erase_if(hosts, [&](const HostSlots& h) {
    const auto entry = std::find_if(active.begin(), active.end(),
                                    [&](const LedgerEntry& e) { return e.host == h.name; });
    if (entry == active.end()) return false;
    skipped.push_back(fmt::format("{}: {}", h.name, describe(*entry)));
    return true;
  });
  if (hosts.empty() && !skipped.empty()) {
    throw UsageError(
        fmt::format("every host is in the ledger of bad nodes {} ({}); clear those "
                    "that were repaired (npu_run ledger clear HOST)",
                    path, fmt::join(skipped, "; ")));
  }
  return skipped;
}

void refuse_per_host_options(const LaunchOptions& o, size_t host_count) {
  for (const std::string& given : {o.shape.node_rank.given() ? o.shape.node_rank.source() : "",
                                   o.shape.standalone.given() ? o.shape.standalone.source() : ""}) {
    if (given.empty()) continue;
    throw UsageError(fmt::format(
        "{} cannot be given with --hosts/--hostfile: the launcher gives each host its node rank "
        "(the first host is node 0); drop it",
        given));
  }
  const Flag<std::string>& nnodes = o.rdzv.nnodes;
  if (!nnodes.given()) return;
  const auto [min_nodes, max_nodes] = parse_nnodes(*nnodes, nnodes.source());
  (void)min_nodes;
  const int spares = o.shape.spares.given() ? *o.shape.spares : 0;
  if (static_cast<size_t>(max_nodes) + static_cast<size_t>(spares) != host_count) {
    throw UsageError(fmt::format("{} {}{} but {} host{} named; drop {} (the hosts decide it)",
                                 nnodes.source(), *nnodes,
                                 spares > 0 ? fmt::format(" with --spares {}", spares) : "",
                                 host_count, host_count == 1 ? " is" : "s are", nnodes.source()));
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
  std::vector<std::string> files = *o.hosts.env_files;
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
  for (const std::string& item : *o.hosts.env) {
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

// Every option given here (typed or from its PET_ variable), written out for the agents'
// command line: "--name=value", a flag as "--name".
std::vector<std::string> forwarded_options(const LaunchOptions& o) {
  std::vector<std::string> args;
  for (const CLI::Option* option : o.app().get_options()) {
    if (option->count() == 0 || option->get_lnames().empty() || !o.reaches_agents(option)) continue;
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
  if (!o.shape.cluster.given()) args.emplace_back("--cluster=none");
  return args;
}

// ssh: the program, --ssh-port, --ssh-option, the fan-out, the tree and --ship-binary.
SshSettings resolve_ssh(const HostsFlags& f, const EnvMap& env, HostProbe& host) {
  if (*f.ssh_fanout < 1 || *f.ssh_fanout > 1024) {
    throw UsageError(
        fmt::format("--ssh-fanout {}: expected 1 to 1024 connections at once", *f.ssh_fanout));
  }
  if (f.ssh_port.given() && (*f.ssh_port < 1 || *f.ssh_port > 65535))
    throw UsageError(fmt::format("--ssh-port {}: expected 1 to 65535", *f.ssh_port));
  for (const std::string& option : *f.ssh_options) {
    if (option.find('=') == std::string::npos || option.front() == '-') {
      throw UsageError(
          fmt::format("--ssh-option '{}': expected OPTION=VALUE as ssh's -o takes it (e.g. "
                      "--ssh-option IdentityFile=~/.ssh/cluster)",
                      printable(option)));
    }
  }
  SshSettings ssh;
  ssh.program = lookup(env, "NPU_RUN_SSH").value_or("ssh");
  if (host.find_program(ssh.program).empty()) {
    throw UsageError(
        fmt::format("ssh ('{}') is not on PATH here; install OpenSSH's client, or name it with "
                    "NPU_RUN_SSH",
                    ssh.program));
  }
  if (f.ssh_port.given()) ssh.port = *f.ssh_port;
  ssh.options = *f.ssh_options;
  ssh.fanout = *f.ssh_fanout;
  ssh.tree = *f.ssh_tree;
  ssh.ship_binary = *f.ship_binary;
  return ssh;
}

// The hosts and their slots, checked against the options that also pick workers or nodes.
std::vector<HostSlots> resolve_host_slots(const LaunchOptions& o, HostProbe& host,
                                          std::optional<int> numeric_nproc,
                                          std::vector<std::string>& ledgered) {
  std::vector<HostSlots> hosts =
      filter_hosts(read_hosts(o.hosts, host), *o.hosts.include, *o.hosts.exclude, numeric_nproc);
  ledgered = skip_ledgered(hosts, o, host);
  if (o.shape.spares.given() &&
      (*o.shape.spares < 0 || static_cast<size_t>(*o.shape.spares) >= hosts.size())) {
    throw UsageError(
        fmt::format("{} {}: the spares are the last of the {} hosts, and at least one "
                    "must run the job",
                    o.shape.spares.source(), *o.shape.spares, hosts.size()));
  }
  check_slots_against_nproc(hosts, o, numeric_nproc);
  refuse_per_host_options(o, hosts.size());
  for (const HostSlots& h : hosts) {
    if (o.shape.devices.given() && !h.devices.empty()) {
      throw UsageError(
          fmt::format("{} and --include/--exclude both pick host '{}''s devices; use one of them",
                      o.shape.devices.source(), h.name));
    }
  }
  return hosts;
}

}  // namespace

HostsLaunch resolve_hosts(const LaunchOptions& o, const std::vector<std::string>& script_and_args,
                          const EnvMap& env, HostProbe& host) {
  HostsLaunch launch;
  launch.nproc_per_node = *o.shape.nproc_per_node;
  std::optional<int> numeric_nproc;
  if (const auto n = parse_integer(launch.nproc_per_node, 1, kMaxWorkersPerNode))
    numeric_nproc = static_cast<int>(*n);
  launch.hosts = resolve_host_slots(o, host, numeric_nproc, launch.ledgered);
  launch.spares = o.shape.spares.given() ? *o.shape.spares : 0;
  launch.ssh = resolve_ssh(o.hosts, env, host);
  launch.env = passed_variables(o, env, host);
  launch.working_directory = host.working_directory();
  launch.agent_options = forwarded_options(o);
  launch.script_and_args = script_and_args;
  const ShapeFlags& shape = o.shape;
  launch.rendezvous_given = shape.master_addr.given() || shape.rdzv_endpoint.given();
  if (shape.master_addr.given()) launch.master_addr = *shape.master_addr;
  launch.master_port = *shape.master_port;
  if (o.output.prefix_template.given()) launch.prefix_template = *o.output.prefix_template;
  if (auto given = resolve_given_token(o.rdzv, host)) launch.token = *given;
  launch.agent.log_level = *o.agent.log_level;
  launch.agent.dry_run = *o.agent.dry_run;
  launch.agent.json = *o.agent.json;
  return launch;
}

}  // namespace npu_run
