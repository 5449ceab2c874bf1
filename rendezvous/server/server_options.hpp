// What a rendezvous server is asked to do beyond the job's settings (rendezvous/server/server.hpp):
// where it listens, its time limits, the other protocol on its port and the hooks of its
// host; and the error a failed bind throws. A header of its own, so that the server's parts
// (its listeners, its protocol switch) need these without the server itself.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "net/stream_connection.hpp"
#include "rendezvous/protocol/job_memory.hpp"
#include "rendezvous/state/state_io.hpp"

namespace npu_run::rdzv {

class RendezvousState;

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

}  // namespace npu_run::rdzv
