// The rendezvous server: one Asio event loop that accepts continuously, frames bytes and feeds
// RendezvousState. Hosted by node 0's agent or run alone by `npu_run rdzv-server`.
#pragma once

#include <chrono>
#include <functional>
#include <memory>

#include "rendezvous/server/server_options.hpp"
#include "rendezvous/state/state.hpp"

namespace boost::asio {
class io_context;
}

namespace npu_run::rdzv {

class RendezvousServer {
 public:
  using DoneHandler = std::function<void(const Decision&)>;

  // Raises RLIMIT_NOFILE, binds and listens at once; throws BindError.
  RendezvousServer(boost::asio::io_context& io, JobSettings settings, ServerOptions options);
  ~RendezvousServer();
  RendezvousServer(const RendezvousServer&) = delete;
  RendezvousServer& operator=(const RendezvousServer&) = delete;

  int port() const;
  int backlog() const;
  // Starts accepting. `on_done` runs once: the job has ended and every agent has gone (or the
  // exit barrier timed out), or stop() was called.
  void start(DoneHandler on_done);
  // Closes the listener and every connection now; agents see the server as lost.
  void stop();
  bool job_finished() const;
  // True while a round runs or is being stopped: node 0's agent may be done, but the other nodes
  // still need the server to hear the job's decision.
  bool round_in_progress() const;
  size_t connections() const;
  // Sets ServerOptions::job_ended after the server was made (node 0 knows its run directory).
  void on_job_ended(std::function<void(const RendezvousState&)> ended);
  // The job as the server sees it, for metrics (read on the server's loop only).
  const RendezvousState& state() const;
  // Agents that said in a heartbeat at `since` or later that they reach etcd.
  size_t clients_reaching_etcd(std::chrono::steady_clock::time_point since) const;
  // While held, an agent that hangs up is not yet lost to the job: an etcd leader whose lease
  // is in doubt holds them, because an agent that left may be following a leader etcd elected in
  // its place. Released, they count (the lease held: they did leave); a server retired instead
  // never counts them.
  void hold_departures(bool hold);

 private:
  struct Impl;
  std::shared_ptr<Impl> impl_;
};

}  // namespace npu_run::rdzv
