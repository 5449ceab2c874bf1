#include "remote/launcher_link.hpp"

#include <fcntl.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <cstring>
#include <stdexcept>

#include "basics/exit_status.hpp"
#include "basics/token_file.hpp"
#include "npu_run/version.hpp"
#include "remote/control_channel.hpp"
#include "remote/control_lines.hpp"
#include "remote/host_sessions.hpp"
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

// The binary for the hosts that ask for it; null when none will (or it cannot be read).
std::shared_ptr<const std::string> binary_to_ship(const Preamble& preamble) {
  const bool ships = std::any_of(preamble.children.begin(), preamble.children.end(),
                                 [](const ChildHost& c) { return c.ship_binary; });
  if (!ships) return nullptr;
  try {
    return read_self_binary().bytes;
  } catch (const std::exception& e) {
    spdlog::error("{}", e.what());
    return nullptr;
  }
}

// What runs beside the agent in its loop: the control channel and the hosts of the subtree.
struct Attached {
  std::shared_ptr<ControlChannel> control;
  std::unique_ptr<ChildExits> exits;
  std::unique_ptr<HostSessions> sessions;
};

HostSessions::Handlers session_handlers(const std::function<void()>& done) {
  return HostSessions::Handlers{[](const std::string& host) {
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
}

}  // namespace

LauncherLink::LauncherLink(std::string name) : name_(std::move(name)), control_fd_(take_stdin()) {
  say({ControlLine::Kind::kHello, kVersion, 0, ""});
  try {
    preamble_ = parse_preamble(
        read_line_with_deadline(control_fd_, kPreambleTimeout, kMaxPreambleBytes, after_preamble_));
  } catch (const std::exception& e) {
    ::close(control_fd_);
    throw std::runtime_error(std::string("no preamble from the launcher: ") + e.what());
  }
}

LauncherLink::~LauncherLink() {
  if (control_fd_ >= 0) ::close(control_fd_);
}

EnvMap LauncherLink::agent_env(const EnvMap& env) const {
  EnvMap agent_env = env;
  for (const auto& [variable, value] : preamble_.env) agent_env[variable] = value;
  if (!preamble_.token.empty()) agent_env[kTokenVariable] = preamble_.token;
  return agent_env;
}

void LauncherLink::say_ready() const {
  say({ControlLine::Kind::kReady, name_, 0, ""});
}

void LauncherLink::say_exit(int code) const {
  say({ControlLine::Kind::kExit, name_, code, ""});
}

std::shared_ptr<void> LauncherLink::attach(boost::asio::io_context& io, const StopAgent& stop,
                                           const std::function<void()>& done) {
  auto attached = std::make_shared<Attached>();
  Attached* a = attached.get();
  if (preamble_.children.empty()) {
    done();
  } else {
    a->exits = std::make_unique<ChildExits>(io);
    a->sessions =
        std::make_unique<HostSessions>(io, *a->exits, starts_of(preamble_), preamble_.fanout,
                                       binary_to_ship(preamble_), session_handlers(done));
    a->sessions->start();
  }
  a->control = std::make_shared<ControlChannel>(
      io, std::exchange(control_fd_, -1),
      [a, stop](int sig) {
        if (a->sessions) a->sessions->stop(sig);
        stop(sig, "the launcher sent " + signal_name(sig));
      },
      [a, stop] {
        if (a->sessions) a->sessions->hang_up();
        stop(SIGTERM, "the ssh session to the launcher closed");
      });
  a->control->start(after_preamble_);
  return attached;
}

}  // namespace npu_run
