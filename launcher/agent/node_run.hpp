// One node's part of the job on its io_context, until everything it started is done: the agent,
// node 0's rendezvous server beside it, and what the caller attaches. The server outlives the
// agent while a round is in progress (the other nodes still have to stop and hear the
// decision), within the grace of --term-timeout + --exit-barrier-timeout; with no round in
// progress it stops with the agent.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "agent/local_agent.hpp"
#include "config/launch_config.hpp"
#include "rendezvous/server/server.hpp"

namespace boost::asio {
class io_context;
}

namespace npu_run {

// What a caller adds to the node's event loop: the host-agent of a launch over ssh reads its
// control channel and starts the hosts of its subtree there. `attach` is called once the agent
// exists, before the loop runs, with a way to stop the agent (as signal `sig` would, `why`
// saying what happened) and `done`, which it calls once its own work has ended: the loop runs
// until then too. What it returns lives as long as the loop.
struct LaunchHooks {
  using StopAgent = std::function<void(int sig, const std::string& why)>;
  std::function<std::shared_ptr<void>(boost::asio::io_context& io, StopAgent stop,
                                      std::function<void()> done)>
      attach;
};

// Each worker takes a few descriptors in the agent (its output pipes, pidfd and exec report,
// more while it starts), the agent a few dozen of its own. With fewer, a socket or a pipe fails
// later under a misleading name ("not an address of this host"): raised to what is needed when
// the hard limit allows, else a UsageError with the fix, before anything starts.
void require_open_files(int nproc);

// Runs `agent`, `server` (null: this node hosts none; a server `rendezvous` starts hosting
// later is run the same way) and `hooks` until all are done, and `rendezvous` has closed;
// returns the agent's exit status.
int run_node(boost::asio::io_context& io, LocalAgent& agent, rdzv::RendezvousServer* server,
             Rendezvous& rendezvous, const LaunchConfig& cfg, const LaunchHooks& hooks);

}  // namespace npu_run
