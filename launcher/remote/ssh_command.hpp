// The ssh command that starts one host's agent: the user's ssh with their options first (ssh
// keeps the first value it reads for an option, so theirs win over npu_run's defaults), and one
// remote command line for the host's login shell, every word quoted for it.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "basics/text.hpp"
#include "config/hosts_launch.hpp"

namespace npu_run {

// ssh's argv (program first) to run `remote_command` on `destination`.
std::vector<std::string> ssh_argv(const SshSettings& ssh, const std::string& destination,
                                  const std::string& remote_command);
// `ssh -G destination`: the configuration ssh would use (its HostName line names the address).
std::vector<std::string> ssh_config_argv(const SshSettings& ssh, const std::string& destination);

// --ship-binary: where the binary lands on a host ($HOME/.cache/npu_run/npu_run-<hash>) and how
// big it is. The hash names the content: a host that has it already is sent nothing.
struct ShippedBinary {
  std::string digest;  // hex SHA-256 of the file, the first 16 digits name it
  size_t size = 0;
};

// The remote command line of host `name`: cd to `directory`, then exec the host-agent with the
// agent's arguments. With `shipped`, the binary is first received from stdin when missing.
std::string remote_agent_command(const std::string& directory, const std::string& program,
                                 const std::string& name,
                                 const std::vector<std::string>& agent_args,
                                 const std::optional<ShippedBinary>& shipped);

// "HostName" from `ssh -G`'s output; empty when it has none.
std::string host_name_from_ssh_config(std::string_view ssh_g_output);

}  // namespace npu_run
