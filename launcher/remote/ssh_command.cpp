#include "remote/ssh_command.hpp"

#include <fmt/format.h>

#include "basics/text.hpp"

namespace npu_run {

namespace {

// The user's options, then npu_run's: no password prompt nobody can answer (a launcher of many
// hosts has no terminal for each), a bounded connect so an unreachable host is named long before
// the rendezvous gives up, keep-alives so a silent network is noticed, and no chatter.
std::vector<std::string> common_options(const SshSettings& ssh) {
  std::vector<std::string> argv{ssh.program};
  if (ssh.port) {
    argv.emplace_back("-p");
    argv.push_back(std::to_string(*ssh.port));
  }
  for (const std::string& option : ssh.options) {
    argv.emplace_back("-o");
    argv.push_back(option);
  }
  for (const char* option : {"BatchMode=yes", "ConnectTimeout=30", "ServerAliveInterval=15",
                             "ServerAliveCountMax=4", "LogLevel=ERROR"}) {
    argv.emplace_back("-o");
    argv.emplace_back(option);
  }
  return argv;
}

}  // namespace

std::vector<std::string> ssh_argv(const SshSettings& ssh, const std::string& destination,
                                  const std::string& remote_command) {
  std::vector<std::string> argv = common_options(ssh);
  // No terminal (stdin is npu_run's control channel), no X11 or agent forwarding.
  for (const char* flag : {"-T", "-x", "-a"}) argv.emplace_back(flag);
  argv.push_back(destination);
  argv.push_back(remote_command);
  return argv;
}

std::vector<std::string> ssh_config_argv(const SshSettings& ssh, const std::string& destination) {
  std::vector<std::string> argv = common_options(ssh);
  argv.emplace_back("-G");
  argv.push_back(destination);
  return argv;
}

std::string remote_agent_command(const std::string& directory, const std::string& program,
                                 const std::string& name,
                                 const std::vector<std::string>& agent_args,
                                 const std::optional<ShippedBinary>& shipped) {
  std::vector<std::string> exec{"host-agent", "--name", name, "--"};
  exec.insert(exec.end(), agent_args.begin(), agent_args.end());
  const std::string cd = "cd -- " + shell_quote(directory);
  if (!shipped) return fmt::format("{} && exec {} {}", cd, shell_quote(program), shell_join(exec));
  // Asks for the binary only when this content is missing; it arrives on stdin, exactly `size`
  // bytes (the launcher writes nothing else until it is told the host runs), and is renamed into
  // place whole, so concurrent jobs and a shared home directory never run half a file.
  const std::string file =
      fmt::format("\"$HOME/.cache/npu_run/npu_run-{}\"", shipped->digest.substr(0, 16));
  return fmt::format(
      "P={0}; if [ -x \"$P\" ]; then printf '\\036npu_run have -\\n'; else "
      "printf '\\036npu_run need -\\n'; mkdir -p \"$HOME/.cache/npu_run\" && "
      "head -c {1} > \"$P.$$\" && [ \"$(wc -c < \"$P.$$\")\" -eq {1} ] && chmod 755 \"$P.$$\" && "
      "mv -f \"$P.$$\" \"$P\" || {{ rm -f \"$P.$$\"; echo \"npu_run: cannot receive the binary "
      "into $P\" >&2; exit 126; }}; fi; {2} && exec \"$P\" {3}",
      file, shipped->size, cd, shell_join(exec));
}

std::string host_name_from_ssh_config(std::string_view ssh_g_output) {
  for (std::string_view line : split(ssh_g_output, '\n')) {
    constexpr std::string_view kKey = "hostname ";
    if (line.substr(0, kKey.size()) == kKey) return std::string(trim(line.substr(kKey.size())));
  }
  return "";
}

}  // namespace npu_run
