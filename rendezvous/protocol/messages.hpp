// The rendezvous conversation as data: what agents send the server and what it answers. The
// state machine works on these structs only; `rendezvous/protocol/protocol.hpp` turns them into
// framed JSON.
//
// Agents send hello (magic, version, run id, a nonce when they have a token, a random session
// key), auth (their HMAC proof), join (node info, optional node rank, --nnodes, --max-restarts,
// whether they want the peer table, the command their workers run), heartbeat (the count of
// sequenced messages received; their ranks' beats when those changed), status (a query, from an
// agent or `npu_run status`), report (round, outcome, root cause, whether the workers
// progressed, after a hang each rank's top frames), hang (a worker hung, sent before the node
// stops anything), and, on a new connection instead of a join, resume. The server answers
// challenge (its nonce and proof, when the job has a token), welcome (the heartbeat interval and
// timeout), status, progress, assigned, stop, reform, decision, heartbeat_ack, resumed, or error
// followed by closing the connection.
//
// Sessions outlive connections: join/report/hang and progress/assigned/stop/reform/decision are
// sequenced (sequenced() below). Each end counts those it sent and received from the welcome
// on, heartbeats and their acks carry the count received, and the sender keeps what is not
// confirmed yet, to send again after a resume (`rendezvous/server/server_sessions.hpp`).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "basics/exit_status.hpp"  // kExitRendezvous
#include "health/device_pings.hpp"
#include "health/gate_settings.hpp"
#include "health/verdict.hpp"
#include "rendezvous/protocol/dump_messages.hpp"
#include "rendezvous/protocol/message_parts.hpp"
#include "rendezvous/protocol/probe_messages.hpp"
#include "rendezvous/protocol/protocol_version.hpp"
#include "rendezvous/protocol/snapshot_messages.hpp"
#include "rendezvous/protocol/straggler_messages.hpp"
#include "rendezvous/protocol/timeline.hpp"

namespace npu_run::rdzv {

// ---- agent -> server ----

struct Hello {
  std::string magic;
  int version = 0;
  std::string run_id;
  // The agent's half of the challenge when it has a token (see `rendezvous/protocol/auth.hpp`);
  // empty: no token.
  std::string nonce;
  // Random, chosen by the agent once per run: what a later connection names to resume this
  // session (Resume). Empty: the agent never resumes.
  std::string session{};
};

// The answer to a Challenge: proves the agent knows the token.
struct Auth {
  std::string proof;
};

struct Join {
  NodeInfo node;
  std::optional<int> node_rank;  // --node-rank, when given
  int min_nodes = 1;
  int max_nodes = 1;
  int max_restarts = 0;
  bool want_peers = false;  // ask for every node's NodeInfo (rank tables)
  // What the workers run (entrypoint and arguments, not the interpreter's path). With the
  // default run id it is what tells two jobs on one port apart.
  std::string command;
  // kGate: the round waits for this agent's HealthReport, and a failed one keeps it out (an
  // elastic job) or ends the job (a static one). kWarn: its verdict is only shown.
  HealthMode health = HealthMode::kOff;
  int spares = 0;  // --spares: agents beyond the job's nodes that wait as standbys
  // --spare-affinity (or "superpod:<id>" from the rank table): a spare with the same label as
  // a lost node is preferred for its seat.
  std::string affinity{};
  // "host-pid", with an etcd rendezvous: the same agent to every leader, so that a new leader
  // gives it the seat it held under the lost one (JobMemory::seats).
  std::string agent{};
  // For the timeline and the blame of a slow round (rendezvous/state/round_blame.hpp): when the
  // agent started, when it first dialled the rendezvous for this join, and how many connections it
  // took to be welcomed (wall clock, ms since the epoch; 0: unknown).
  int64_t started_ms = 0;
  int64_t dialled_ms = 0;
  int dials = 1;
  // The snapshots this agent holds (npu_run_checkpoint): the next round's restore point is
  // chosen from every seat's (rendezvous/state/restore_choice.hpp). None before the first snapshot.
  std::optional<HeldSnapshots> snapshots{};
};

// The node checks' verdict (health/verdict.hpp, compact()ed), sent once they are done and again
// after each recheck of a node its verdict kept out of an elastic job.
struct HealthReport {
  NodeVerdict verdict;
};

// The answers to a PingRequest, one per ping asked for.
struct PingReport {
  uint64_t run = 0;  // the PingRequest's
  std::vector<PingResult> results;
};

// A rank's progress beats (NPU_RUN_PROGRESS) as its agent last saw them.
struct RankBeat {
  int local_rank = 0;
  uint64_t beats = 0;                      // in this attempt
  std::string text;                        // of the last one; empty before the first
  int64_t age_ms = -1;                     // since the last one, when sent; -1: none yet
  std::optional<RankSnapshot> snapshot{};  // npu_run_checkpoint's, once the rank saved one
};

struct Heartbeat {
  uint64_t received = 0;  // sequenced server messages received so far (see Sequenced)
  // This node's ranks, when their beats changed since the last heartbeat: what npu_run status
  // shows of the other nodes.
  std::optional<std::vector<RankBeat>> ranks{};
  // An etcd rendezvous: whether this agent renewed its etcd lease lately. A leader that cannot
  // renew its own tells from it whether it alone is cut off from etcd (it steps down) or etcd
  // is gone for everyone (the job goes on without failover).
  std::optional<bool> etcd{};
};

// The job as the rendezvous sees it (JobStatus), asked by `npu_run status` on a connection of
// its own (welcomed like an agent, never joined; the answer closes it) or by an agent for it.
struct StatusQuery {
  uint64_t id = 0;  // echoed in the answer: an agent matches answers to its queries by it
  bool dump =
      false;  // collect every running rank's records first (rendezvous/protocol/dump_messages.hpp)
};

// Instead of a join, on a new connection after the old one fell silent or broke: this is the
// agent that said hello with `session`, and it has received `received` sequenced messages.
struct Resume {
  std::string session{};
  uint64_t received = 0;
};

enum class Outcome { kSucceeded, kFailed, kStopped };

// The result of this node's workers for one round.
struct Report {
  uint64_t round = 0;
  Outcome outcome = Outcome::kSucceeded;
  // kFailed: this node's root cause. kStopped by a signal to the agent: what stopped it.
  std::optional<FailureReport> failure;
  int stop_signal = 0;  // kStopped because the agent itself was signalled (it leaves the job)
  bool fatal = false;   // kFailed for a reason a restart cannot cure (bad rank table, topology)
  // With stop_signal: the node leaves on purpose. An elastic job (--nnodes MIN:MAX) re-forms
  // without it; a static one ends. The agent hosting the server never leaves this way.
  bool leaving = false;
  // Some worker of this node beat past its best of the earlier attempts (always true for a
  // first attempt that beat at all): what --max-no-progress-restarts counts.
  bool progressed = true;
  // After a hang's stack dump: where each of this node's ranks was (those with frames only).
  std::vector<RankStack> stacks{};
  // This node's events of the round (agent/records/agent_timeline.hpp): at most kMaxReportEvents.
  std::vector<TimelineEvent> timeline{};
};

// A worker of this node hung (--hang-timeout, --exit-timeout): sent at once, before this node
// stops its workers, so that the other nodes are told to stop (StopWorkers with the hang as
// root cause, on which they dump their workers' stacks) while every rank is still where it was
// stuck. The node's Report follows when its group is done.
struct HangNotice {
  uint64_t round = 0;
  FailureReport failure;
};

using ClientMessage =
    std::variant<Hello, Join, Heartbeat, Report, Auth, Resume, HangNotice, StatusQuery,
                 HealthReport, PingReport, RecordsCollected, ProbeReport, CollectiveSample>;

// What an agent's rooms send (Rendezvous::send): the messages of the job's features, as against
// the link's own (hello, auth, join, heartbeat, resume, report, status). Each is a ClientMessage
// too; a link carries any of them without knowing which.
using RoomMessage = std::variant<HangNotice, HealthReport, PingReport, RecordsCollected,
                                 ProbeReport, CollectiveSample>;

// ---- server -> agent ----

struct Welcome {
  int64_t heartbeat_interval_ms = 0;
  int64_t heartbeat_timeout_ms = 0;
};

// Fatal for the agent that receives it; the server closes the connection after sending it.
struct ErrorReply {
  std::string code;  // machine-readable, e.g. "node_rank_taken"
  std::string message;
};

struct Progress {
  int joined = 0;
  int expected = 0;
  std::vector<int> missing_node_ranks;  // when every joined agent gave --node-rank
};

struct PeerInfo {
  int node_rank = 0;
  int rank_offset = 0;
  NodeInfo node;
};

struct Assigned {
  uint64_t round = 0;
  int restart_count = 0;
  int node_rank = 0;
  int nnodes = 1;
  int world_size = 1;
  int rank_offset = 0;
  std::string master_addr;  // workers' store: node 0's address and held port
  int master_port = 0;
  std::vector<PeerInfo> peers;  // only when the Join asked for them
  // What the health gate says to every node of the round, once: the job checks' warnings
  // (settings that differ), and the failures of nodes whose checks only warn (--health-check warn).
  std::vector<std::string> health_notes{};
  // The step every rank of the round loads through npu_run_checkpoint.load, and from where.
  RestorePoint restore{};
  CopyPeer copy_to{};  // the next node's agent in the ring, for snapshot copies (port 0: none)
  // --sp-block: the logical SuperPoD of this node's ranks (rendezvous/state/node_order.hpp), which
  // its workers get as HCCL_LOGIC_SUPERPOD_ID. Empty: none cut.
  std::string block{};
  // --preflight: what the probe before this round measured and found (state_probe.cpp).
  std::vector<std::string> probe_notes{};
};

// A failure elsewhere: stop this node's workers, then Report.
struct StopWorkers {
  uint64_t round = 0;
  FailureReport root_cause;
};

// An elastic job re-forms because a node joined or one left on purpose. Not a failure: stop this
// node's workers, report, and join the next round; no restart is counted.
struct Reform {
  uint64_t round = 0;
  std::string host;    // the node that joined or left
  int node_rank = -1;  // the node that left; -1 for one that joined
  std::string reason;  // "the job re-forms as round 1 to add host-b (3 nodes)"
};

enum class Action { kRestart, kFinish };

// Why a round failed, as the restart classification tells it (rendezvous/state/failure_class.hpp):
// the node's fault (a spare replaces it; never a restart of --max-restarts), the script's
// (the same failure again: the job stops with kExitNoProgress), or neither.
enum class FailureClass { kNone, kInfrastructure, kDeterministic, kOther };

// What every node does once all nodes reported: run the next round, or end with exit_code.
struct Decision {
  uint64_t round = 0;
  Action action = Action::kFinish;
  int restart_count = 0;
  int exit_code = 0;
  std::optional<FailureReport> root_cause;
  // kRestart because nodes joined or left an elastic job (see Reform), not because of a
  // failure: the restart count did not grow.
  bool membership_change = false;
  // After a hang: the ranks whose top frame differs from the majority's (rendezvous/
  // hang_blame.hpp), in rank order; the first is the root cause.
  std::vector<int> odd_ranks{};
  // With a root cause: its class, and why ("deterministic: ValueError at train.py:88 in step,
  // twice").
  FailureClass failure_class = FailureClass::kNone;
  std::string class_reason{};
  // Restarts counted against --max-restarts so far (restart_count also counts those an
  // infrastructure failure cost, which are not).
  int restarts_charged = 0;
};

struct HeartbeatAck {
  uint64_t received = 0;  // sequenced messages of this agent the server received so far
};

// The answer to a Resume: the session continues on this connection. The server has received
// `received` sequenced messages of the agent, which sends again those after them; the server
// sends again those after the agent's count next.
struct Resumed {
  uint64_t received = 0;
};

// The job has a token: the server's nonce and its proof that it knows the token too.
struct Challenge {
  std::string nonce;
  std::string proof;
};

// One node in a JobStatus.
struct NodeStatus {
  int node_rank = -1;  // -1: waiting for the next round
  std::string host;
  std::string addr;
  int nproc = 0;
  int rank_offset = 0;
  // "running", "reported" (its workers are done), "lost", "left", "waiting" (for a round),
  // "checking" (its health checks run), "excluded" (it failed its health gate; it rechecks),
  // "spare" (--spares: it waits to take a lost node's seat).
  std::string state;
  int64_t silent_ms = 0;        // since the server last heard from it
  std::vector<RankBeat> ranks;  // age_ms as of the answer; empty: no beats heard
  // Its last health verdict (compact: passes counted); none without the health gate.
  std::optional<NodeVerdict> health{};
  std::string place{};  // where it sits in the network (TopologyPath::describe); empty: unknown
};

struct JobStatus {
  uint64_t query_id = 0;  // the StatusQuery's id
  std::string run_id;
  std::string phase;  // "joining", "running", "stopping", "finished"
  uint64_t round = 0;
  int restart_count = 0;
  int max_restarts = 0;
  int min_nodes = 1;
  int max_nodes = 1;
  std::vector<NodeStatus> nodes;        // the round's members by node rank, then those waiting
  int missing_nodes = 0;                // joining: how many more the round needs
  std::vector<int> missing_node_ranks;  // joining: which, when every agent gave --node-rank
  std::optional<FailureReport> root_cause;
  // Where the time of the last round formed went (rendezvous/state/round_blame.hpp); empty: none
  // yet.
  std::string blame{};
  std::optional<JobDump> dump{};               // asked with StatusQuery::dump
  std::optional<StragglerStatus> straggler{};  // --straggler: named and still slow
};

// Before a round forms, once every verdict is in: the device-plane pings this node makes
// (health/device_pings.hpp). The round waits for every asked node's PingReport.
struct PingRequest {
  uint64_t run = 0;  // answers to an older run, which a leaving node cut short, are dropped
  std::vector<DevicePing> pings;
};

// What the pings found for this node (pairs it is in that failed, or a pass), sent to every
// node that pinged before the round forms or the gate ends the job.
struct PingVerdict {
  std::vector<HealthFinding> findings;
};

// This agent is a spare (--spares): it holds no workers and waits, heartbeating, to take the
// seat of a node the job loses (an Assigned for that node rank), or to be dismissed.
struct Standby {
  uint64_t round = 0;  // the round it stands by for
  int nodes = 0;       // the round's nodes
  int spares = 0;      // spares waiting, this one among them
};

// This agent leaves the job now with `exit_code`: a spare the job no longer needs (it ended),
// or a node taken out (a device fault, a failed health gate) whose seat a spare takes or an
// elastic job does without.
struct Dismissed {
  std::string reason;
  int exit_code = 0;
};

using ServerMessage = std::variant<Welcome, ErrorReply, Progress, Assigned, StopWorkers, Decision,
                                   HeartbeatAck, Challenge, Reform, Resumed, JobStatus, PingRequest,
                                   PingVerdict, Standby, Dismissed, CollectRecords, ProbeRequest>;

// The wire name of a message type ("hello", "assigned", ...), for logs and errors.
inline const char* message_name(const ClientMessage& message) {
  static const char* const kNames[] = {
      "hello",  "join",   "heartbeat",   "report",  "auth",         "resume", "hang",
      "status", "health", "ping_report", "records", "probe_report", "sample"};
  return kNames[message.index()];
}
inline const char* message_name(const ServerMessage& message) {
  static const char* const kNames[] = {
      "welcome",       "error",     "progress",  "assigned", "stop",   "decision",
      "heartbeat_ack", "challenge", "reform",    "resumed",  "status", "pings",
      "ping_verdict",  "standby",   "dismissed", "collect",  "probe"};
  return kNames[message.index()];
}

// Sequenced messages are the session's content, counted by both ends from the welcome on and
// kept by their sender until the other end's count says they arrived, so that a session that
// moves to a new connection loses none and repeats none. The rest belong to one connection
// (handshake, liveness, the resume itself, and errors, after which the connection closes).
inline bool sequenced(const ClientMessage& message) {
  return std::holds_alternative<Join>(message) || std::holds_alternative<Report>(message) ||
         std::holds_alternative<HangNotice>(message) ||
         std::holds_alternative<HealthReport>(message) ||
         std::holds_alternative<PingReport>(message) ||
         std::holds_alternative<ProbeReport>(message);
}
inline bool sequenced(const ServerMessage& message) {
  return std::holds_alternative<Progress>(message) || std::holds_alternative<Assigned>(message) ||
         std::holds_alternative<StopWorkers>(message) ||
         std::holds_alternative<Decision>(message) || std::holds_alternative<Reform>(message) ||
         std::holds_alternative<PingRequest>(message) ||
         std::holds_alternative<PingVerdict>(message) || std::holds_alternative<Standby>(message) ||
         std::holds_alternative<Dismissed>(message) ||
         std::holds_alternative<ProbeRequest>(message);
}

}  // namespace npu_run::rdzv
