// What a host-agent (`npu_run host-agent`, started by the launcher's ssh) has of the launcher:
// its stdin, which becomes the control channel ("stop SIGNAL" lines; EOF when the launcher or
// the connection to it is gone), the preamble read from it first (the token and variables, which
// never travel on a command line, and the hosts it starts in turn with --ssh-tree), and the
// control lines it answers with on stdout (hello, ready, each host's end, its own exit).
#pragma once

#include <boost/asio/io_context.hpp>
#include <functional>
#include <memory>
#include <string>

#include "basics/environment.hpp"
#include "remote/preamble.hpp"

namespace npu_run {

class LauncherLink {
 public:
  // Takes stdin (close-on-exec, not fd 0, which becomes /dev/null: the workers see no input),
  // says hello and reads the preamble within its deadline. Throws std::runtime_error naming
  // what failed.
  explicit LauncherLink(std::string name);
  ~LauncherLink();
  LauncherLink(const LauncherLink&) = delete;
  LauncherLink& operator=(const LauncherLink&) = delete;

  // `env` with the preamble's variables and token.
  EnvMap agent_env(const EnvMap& env) const;
  // The host's agent is about to run / ended with `code`.
  void say_ready() const;
  void say_exit(int code) const;

  using StopAgent = std::function<void(int sig, const std::string& why)>;
  // On the agent's loop: the control channel's stop lines and EOF stop the agent, and the hosts
  // of this one's subtree are started; `done` runs once they have all ended (at once without
  // any). What it returns lives as long as the loop.
  std::shared_ptr<void> attach(boost::asio::io_context& io, const StopAgent& stop,
                               const std::function<void()>& done);

 private:
  std::string name_;
  int control_fd_ = -1;         // owned until attach() hands it to the control channel
  std::string after_preamble_;  // what the launcher sent after the preamble line
  Preamble preamble_;
};

}  // namespace npu_run
