// `npu_run host-agent --name HOST -- AGENT OPTIONS... SCRIPT ARGS`: what the launching npu_run's
// ssh runs on each host (remote/ssh_command.cpp writes the command line). It says hello, reads
// the preamble from stdin (the token and variables, which never travel on a command line, and
// the hosts it starts in turn with --ssh-tree), then runs the host's agent as `npu_run` would,
// with stdin as the launcher's control channel: "stop SIGNAL" lines, EOF when the launcher or
// the connection to it is gone. It ends with a control line giving the agent's exit status.
#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cstring>
#include <iostream>

#include "basics/exit_status.hpp"
#include "basics/token_file.hpp"
#include "commands/commands.hpp"
#include "npu_run/version.hpp"
#include "remote/control_channel.hpp"
#include "remote/control_lines.hpp"
#include "remote/host_sessions.hpp"
#include "remote/preamble.hpp"
#include "remote/self_binary.hpp"
#include "workers/child_exits.hpp"
#include "workers/console.hpp"

namespace npu_run {

namespace {

// The launcher writes the preamble as soon as it reads the hello; a minute covers a host that
// is slow to page the binary in.
constexpr auto kPreambleTimeout = std::chrono::seconds(60);

void say(const ControlLine& line) {
  console_out().write(nullptr, format_control(line));
}

// Stdin becomes the control channel (close-on-exec, not fd 0) and fd 0 /dev/null: the workers,
// and the terminal-input logic, see no input.
int take_stdin() {
  const int control = ::fcntl(0, F_DUPFD_CLOEXEC, 3);
  if (control < 0) throw std::runtime_error(std::string("stdin: ") + std::strerror(errno));
  const int null = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (null >= 0) {
    ::dup2(null, 0);
    ::close(null);
  }
  return control;
}

// The hosts this one starts, as HostStarts for its sessions.
std::vector<HostStart> starts_of(const Preamble& preamble) {
  std::vector<HostStart> starts;
  for (const ChildHost& child : preamble.children) {
    Preamble theirs = preamble;
    theirs.children = child.children;
    starts.push_back(HostStart{child.name, child.argv, format_preamble(theirs), child.ship_binary});
  }
  return starts;
}

// What runs beside the agent in its loop: the control channel and the hosts of the subtree.
struct Attached {
  std::shared_ptr<ControlChannel> control;
  std::unique_ptr<ChildExits> exits;
  std::unique_ptr<HostSessions> sessions;
};

}  // namespace

int host_agent(const std::vector<std::string>& args, const EnvMap& env) {
  if (args.size() < 3 || args[0] != "--name" || args[2] != "--") {
    std::cerr << "npu_run host-agent: started by `npu_run --hosts` over ssh, not by hand\n";
    return kExitUsage;
  }
  const std::string& name = args[1];
  const int control_fd = take_stdin();
  say({ControlLine::Kind::kHello, kVersion, 0, ""});
  Preamble preamble;
  std::string after_preamble;
  try {
    preamble = parse_preamble(
        read_line_with_deadline(control_fd, kPreambleTimeout, kMaxPreambleBytes, after_preamble));
  } catch (const std::exception& e) {
    std::cerr << "npu_run host-agent on " << name << ": no preamble from the launcher: " << e.what()
              << "\n";
    ::close(control_fd);
    return kExitUsage;
  }
  EnvMap agent_env = env;
  for (const auto& [variable, value] : preamble.env) agent_env[variable] = value;
  if (!preamble.token.empty()) agent_env[kTokenVariable] = preamble.token;

  const std::vector<std::string> agent_args(args.begin() + 3, args.end());
  const ParseResult parsed = parse_command_line(agent_args, agent_env);
  if (const auto* early = std::get_if<EarlyExit>(&parsed)) {
    ::close(control_fd);
    return report_early_exit(*early);
  }
  if (!std::holds_alternative<ParsedLaunch>(parsed)) {
    std::cerr << "npu_run host-agent on " << name << ": --hosts/--hostfile reached a host\n";
    ::close(control_fd);
    return kExitUsage;
  }

  std::shared_ptr<const std::string> binary;
  const bool ships = std::any_of(preamble.children.begin(), preamble.children.end(),
                                 [](const ChildHost& c) { return c.ship_binary; });
  if (ships) {
    try {
      binary = read_self_binary().bytes;
    } catch (const std::exception& e) {
      spdlog::error("{}", e.what());
    }
  }
  say({ControlLine::Kind::kReady, name, 0, ""});

  LaunchHooks hooks;
  hooks.attach = [&](boost::asio::io_context& io, const LaunchHooks::StopAgent& stop,
                     const std::function<void()>& done) -> std::shared_ptr<void> {
    auto attached = std::make_shared<Attached>();
    Attached* a = attached.get();
    if (!preamble.children.empty()) {
      a->exits = std::make_unique<ChildExits>(io);
      HostSessions::Handlers handlers{
          [](const std::string& host) {
            say({ControlLine::Kind::kReady, host, 0, ""});
          },
          [](const std::string& host, int code, const std::string& why) {
            if (!why.empty()) spdlog::warn("{}: {}", host, why);
            say({ControlLine::Kind::kExit, host, code, ""});
          },
          [](const std::string& host, int code, const std::string& why) {
            say({ControlLine::Kind::kFailed, host, code, why});
          },
          done};
      a->sessions = std::make_unique<HostSessions>(io, *a->exits, starts_of(preamble),
                                                   preamble.fanout, binary, std::move(handlers));
      a->sessions->start();
    } else {
      done();
    }
    a->control = std::make_shared<ControlChannel>(
        io, control_fd,
        [a, stop](int sig) {
          if (a->sessions) a->sessions->stop(sig);
          stop(sig, "the launcher sent " + signal_name(sig));
        },
        [a, stop] {
          if (a->sessions) a->sessions->hang_up();
          stop(SIGTERM, "the ssh session to the launcher closed");
        });
    a->control->start(after_preamble);
    return attached;
  };
  const int code =
      run_guarded([&] { return launch(std::get<ParsedLaunch>(parsed), agent_env, hooks); });
  say({ControlLine::Kind::kExit, name, code, ""});
  return code;
}

}  // namespace npu_run
