// The interface through which the agent takes part in a job: join a round, get an Assignment,
// report the round's result, and hear the job's decision. The agent depends only on this; a
// single node takes part through the state machine in-process (agent/link/local_rendezvous.cpp), a
// multi-node job through a client of node 0's server (agent/link/tcp_rendezvous.cpp).
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "agent/link/assignment.hpp"
#include "basics/port_range.hpp"
#include "config/launch_config.hpp"
#include "rendezvous/protocol/messages.hpp"

namespace boost::asio {
class io_context;
}

namespace npu_run {

class MetricsText;

namespace rdzv {
class RendezvousServer;
class RendezvousState;
}  // namespace rdzv
namespace store {
class StoreServer;
}

class Rendezvous {
 public:
  // What the agent hears. A link delivers the assignment, its own failure and the health gate's
  // refusal through their handlers, and every other message of the rendezvous through
  // `message`, unread (the agent's Inbox: agent/link/rendezvous_inbox.hpp).
  struct Handlers {
    std::function<void(const Assignment&)> assigned;
    std::function<void(const std::string&)> failed;  // fatal: timeout, refused, lost
    // Fatal: a node failed the health gate of a static job; no worker starts anywhere.
    std::function<void(const std::string&)> health_failed;
    // Each other message of the rendezvous: a failure on another node (StopWorkers), a re-form,
    // the decision, progress while waiting, the pings and the probe asked for, a spare's
    // standby and dismissal, a records dump.
    std::function<void(const rdzv::ServerMessage&)> message;
    // This node's ranks' beats when they changed since the last call: sent with heartbeats, for
    // `npu_run status` anywhere. Unset: none.
    std::function<std::optional<std::vector<rdzv::RankBeat>>()> beats{};
    // Whether this agent reaches etcd, sent with heartbeats (an etcd rendezvous). Unset: nothing.
    std::function<std::optional<bool>()> etcd_reachable{};
    // The snapshots this node's agent holds, for each join (rdzv::Join::snapshots). Unset: none.
    std::function<std::optional<rdzv::HeldSnapshots>()> snapshots{};
  };
  // The job's status, or why there is none.
  using StatusAnswer = std::variant<rdzv::JobStatus, std::string>;
  // What `npu_run status` asks for: the status, or a dump of every running rank's records first.
  enum class StatusAsk { kStatus, kDump };

  virtual ~Rendezvous() = default;
  // Connects (if there is anything to connect to); handlers run from the agent's io_context.
  virtual void start(Handlers handlers) = 0;
  // Joins the next round: the first one, and again after a restart decision.
  virtual void join() = 0;
  virtual void report(const rdzv::Report& report) = 0;
  // A room's message (its health verdict after join(), the pings and the probe asked for, a
  // hang, a records dump, a straggler sample), carried as it is. Where it has nobody to go to
  // (a single node told of its own hang) the link says so and drops it.
  virtual void send(const rdzv::RoomMessage& message) = 0;
  // The job as the rendezvous sees it, for `npu_run status` on this node; `done` runs once,
  // from the agent's io_context.
  virtual void query_status(StatusAsk ask, std::function<void(StatusAnswer)> done) = 0;
  // Leaves the job: what was sent is delivered, then nothing more is heard.
  virtual void close() = 0;
  // The address peers use to reach this node (--local-addr, or the source address of its
  // connection to the rendezvous); "" for a single node.
  virtual std::string local_address() const { return ""; }
  // "127.0.0.1:29500", or "in-process" for a single node; for messages.
  virtual std::string describe() const = 0;
  // A rendezvous server this agent starts hosting while it runs (an etcd rendezvous' elected
  // leader): `hosted` runs with it, so that the node keeps serving it as node 0 serves its own.
  // (By value: the one override keeps it.)
  // NOLINTNEXTLINE(performance-unnecessary-value-param)
  virtual void on_hosting(std::function<void(rdzv::RendezvousServer&)> /*hosted*/) {}
  // Where this agent decides the job itself (a single node in-process, an etcd rendezvous'
  // elected leader): `ended` runs once the job has ended, with its whole state (node 0 writes
  // the timeline). A client of another node's server never decides.
  // NOLINTNEXTLINE(performance-unnecessary-value-param)
  virtual void on_job_ended(std::function<void(const rdzv::RendezvousState&)> /*ended*/) {}
  // --metrics-port: what this way of taking part adds (its store or proxy, a hosted server).
  virtual void add_metrics(MetricsText& /*out*/) const {}
  // Runs `done` once what close() began has ended (an etcd lease revoked, so that the job's
  // keys go at once), within a few seconds.
  // NOLINTNEXTLINE(performance-unnecessary-value-param)
  virtual void when_closed(std::function<void()> done) { done(); }
};

// The two ways to take part. Each holds a worker port for the workers' store; `avoid`: ports the
// workers' MASTER_PORT must not be (HCCL's, the rendezvous port).
std::unique_ptr<Rendezvous> local_rendezvous(boost::asio::io_context& io, const LaunchConfig& cfg,
                                             const std::string& host,
                                             const std::vector<PortRange>& avoid);
std::unique_ptr<Rendezvous> tcp_rendezvous(boost::asio::io_context& io, const LaunchConfig& cfg,
                                           const std::string& host,
                                           const std::vector<PortRange>& avoid);
// --rdzv-backend etcd (agent/link/etcd_rendezvous.cpp): etcd elects the agent that hosts the
// rendezvous and `store` (which must outlive it); the others are its clients, and follow a new
// leader when it is lost.
std::unique_ptr<Rendezvous> etcd_rendezvous(boost::asio::io_context& io, const LaunchConfig& cfg,
                                            const std::string& host,
                                            const std::vector<PortRange>& avoid,
                                            store::StoreServer& store);

// Hands one message from the rendezvous to the agent: the assignment and errors to their
// handlers, every other message to Handlers::message. Welcome, challenges, acknowledgements and
// status answers are the link's own, not the agent's, and are dropped.
void deliver_to_agent(const Rendezvous::Handlers& handlers, const rdzv::ServerMessage& message,
                      const std::string& host);

}  // namespace npu_run
