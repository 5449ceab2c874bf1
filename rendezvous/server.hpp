// The rendezvous server: one Asio event loop that accepts continuously, frames bytes and feeds
// RendezvousState. Hosted by node 0's agent or run alone by `npu_run rdzv-server`.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "net/stream_connection.hpp"
#include "rendezvous/state.hpp"

namespace boost::asio {
class io_context;
}

namespace npu_run::rdzv {

struct ServerOptions {
  std::string bind_addr = "0.0.0.0";  // an address of this host, or a wildcard
  // More addresses of this host to serve on the same port (a master name that resolves to
  // several); those that are not local are skipped.
  std::vector<std::string> also_bind;
  int port = 29500;  // 0: any free port (tests)
  int backlog = 0;   // 0: the kernel's net.core.somaxconn
  // After the job has ended, how long to wait for every agent to hear it and disconnect.
  std::chrono::milliseconds exit_barrier_timeout{300'000};
  // A connection must say hello, prove the token (when the job has one) and join within this
  // time, or it is closed: idle, half-sent (slowloris) and welcomed-but-idle connections cannot
  // pile up.
  std::chrono::milliseconds handshake_timeout{10'000};
  // Connections that have not joined beyond this many close the oldest of them, so strangers
  // cannot use up the descriptors real agents need. 0: max(1024, 2 x the job's nodes).
  size_t max_unjoined = 0;
  // Another protocol served on the same port (the workers' store): a connection whose first
  // bytes are not a rendezvous frame is handed over with those bytes, if it comes from this host
  // or from the address of an agent that joined the job; from anywhere else it is dropped as a
  // stranger's. A connection that stays silent through the handshake timeout goes the same way
  // (torch 1.13 opens a second store connection that never speaks). Unset: rendezvous only.
  std::function<void(const std::shared_ptr<net::StreamConnection>& connection,
                     std::string first_bytes)>
      other_protocol{};
  // Runs when a round forms, before any node hears its assignment: the workers' store starts a
  // fresh key space for the new round's workers.
  std::function<void(uint64_t round)> round_formed{};
  // Runs for each node the job takes out (lost, a failed health gate, a device fault): the
  // ledger of bad nodes records it.
  std::function<void(const TakenOut&)> taken_out{};
  // A job another server ran, continued from its memory (an etcd rendezvous whose leader was
  // lost); and each change of this job's memory as it happens, for the next successor.
  std::optional<JobMemory> resume{};
  std::function<void(const JobMemory&)> memory_changed{};
  // Runs once the job has ended and every agent has gone (or the exit barrier ran out), with
  // every report in: node 0 writes the job's timeline.
  std::function<void(const RendezvousState&)> job_ended{};
};

// Binding failed. `address_in_use` distinguishes "somebody already serves this port" (maybe
// another agent of the job) from everything else.
class BindError : public std::runtime_error {
 public:
  BindError(const std::string& what, bool in_use, bool not_local)
      : std::runtime_error(what), address_in_use(in_use), address_not_local(not_local) {}
  bool address_in_use;
  bool address_not_local;
};

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
