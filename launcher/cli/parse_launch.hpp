// `npu_run [OPTIONS] SCRIPT [ARGS...]` parsed in one pure pass: the arguments, the environment
// map (PET_* variables, PYTHON_EXEC, PATH, the scheduler's variables) and one HostProbe in; a
// checked LaunchConfig, with what the scheduler's environment said beside it, out.
#pragma once

#include <string>
#include <variant>
#include <vector>

#include "basics/environment.hpp"
#include "cli/early_exit.hpp"
#include "cli/host_probe.hpp"
#include "cluster/cluster_env.hpp"
#include "config/hosts_launch.hpp"
#include "config/launch_config.hpp"

namespace npu_run {

struct ParsedLaunch {
  LaunchConfig config;
  // What the scheduler's environment said (logged once by the agent), and warnings of parsing.
  ClusterFacts cluster;
};

// --hosts/--hostfile: this npu_run starts the job's agents over ssh instead of being one.
struct ParsedHosts {
  HostsLaunch launch;
};

using ParseResult = std::variant<ParsedLaunch, EarlyExit, ParsedHosts>;

// `args` excludes argv[0]; `host` is looked at through, never around.
ParseResult parse_command_line(const std::vector<std::string>& args, const EnvMap& env,
                               HostProbe& host);
// The same, looking at this host as `env` describes it.
ParseResult parse_command_line(const std::vector<std::string>& args, const EnvMap& env);

}  // namespace npu_run
