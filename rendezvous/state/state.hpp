// The rendezvous decisions as a pure state machine: messages and the time go in, addressed
// messages come out. No sockets and no clock of its own: both clocks are handed in with every
// event (Now). The Asio server and the single-node in-process rendezvous drive it, and unit
// tests drive it directly. Its code is split by the part of the conversation: state.cpp (the
// handshake), state_rounds.cpp (joining and forming rounds, ticks), state_outcome.cpp (reports,
// failures, re-forms and the decision), state_dumps.cpp (`npu_run status --dump`).
//
// A job goes through rounds. JOINING collects agents until --nnodes have joined (elastic
// MIN:MAX: MAX, or MIN once the last-call window has passed), then assigns node ranks and rank
// offsets (RUNNING). In an elastic job an agent arriving while a round runs with room for it,
// or a node leaving on purpose, re-forms the job: every node stops and joins the next round,
// which does not count as a restart. The first failure anywhere tells every other node to
// stop its workers (STOPPING). When every node has reported, the job restarts in a new round
// (restarts left) or ends (FINISHED) with one exit code and one root cause for all nodes.
//
// The rules, in detail:
// - Seats: explicit --node-ranks keep their seat (those beyond the round's size count as
//   automatic); the others fill the free ranks in --node-order (rendezvous/state/node_order.hpp:
//   topology path, host name in natural order, arrival). Rank offsets
//   are prefix sums of the nodes' worker counts; node 0's address and store port are every
//   worker's store.
// - The root cause: the first failed report, or a lost node (its connection closed, or nothing
//   from it for the heartbeat timeout), carrying the time it was last heard from, so that what
//   its loss did elsewhere (a gloo "Connection reset by peer") never becomes the root cause. A
//   stopped node's own older error replaces it (never a stop by signal or a fatal check).
// - Elastic changes are no failures: a report with `leaving` marks its member left, and stopped
//   nodes' errors are ignored; the decision is a restart with `membership_change` and the same
//   restart count. Lost and left members get no decision and no seat in the next round.
// - --max-no-progress-restarts: failed restarts in a row in which no node's report progressed
//   are counted; at the limit the job finishes with kExitNoProgress instead of restarting.
// - The restart classification (failure_class.hpp) of each root cause, with the attempt
//   before's: a deterministic failure finishes the job at once with kExitNoProgress; an
//   infrastructure failure the job goes on without (a lost node of an elastic job) is a
//   restart that costs nothing of --max-restarts; the restart count still grows.
// - Refusals name what clashed: magic, protocol version, run id, token, --nnodes,
//   --max-restarts, a taken or out-of-range node rank, a full job, a message out of order, and
//   with the default run id (`none`) another command (job_mismatch): two jobs on one port.
// - The health gate: a joiner with Join::health kGate counts for a round only once its
//   HealthReport is in and passed; the round waits while any such verdict is missing (its
//   agent's time budget bounds that). A static job with a failed verdict ends before any worker
//   starts (kExitHealth, naming each node, device and check); an elastic one forms without the
//   failed joiners, which stay waiting and re-form the job when a recheck passes. The job
//   checks (the TLS switch everywhere the same; settings that must agree) run over the verdicts
//   when the round could start, and fail the odd ones out as a node check would. Then, with
//   two or more joiners that know their device addresses, the device-plane pings
//   (health/device_pings.hpp): each is asked for its pings, the round waits for every answer,
//   and unreached pairs fail or warn both ends as a node check would, before the round forms.
// - on_tick: heartbeat deadlines, progress to waiting agents every 5 s (naming the missing node
//   ranks when every agent gave one), the last call of an elastic round, and the join timeout,
//   which names who is missing. A restart resets the join timeout and the last call.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "rendezvous/protocol/job_memory.hpp"
#include "rendezvous/protocol/messages.hpp"
#include "rendezvous/protocol/timeline.hpp"
#include "rendezvous/state/failure_class.hpp"
#include "rendezvous/state/live_dumps.hpp"
#include "rendezvous/state/probe_run.hpp"
#include "rendezvous/state/restore_choice.hpp"
#include "rendezvous/state/round_blame.hpp"
#include "rendezvous/state/state_io.hpp"
#include "rendezvous/state/straggler_desk.hpp"

namespace npu_run::rdzv {

class RendezvousState {
 public:
  enum class Phase { kJoining, kRunning, kStopping, kFinished };

  RendezvousState(JobSettings settings, Now now);
  // Where challenge nonces come from (default: random_nonce()); tests make them predictable.
  void set_nonce_source(std::function<std::string()> source) { nonce_source_ = std::move(source); }

  std::vector<Outgoing> on_message(ClientId from, const ClientMessage& message, Now now);
  std::vector<Outgoing> on_disconnect(ClientId who, Now now);
  // Heartbeat deadlines, progress reports and the join timeout.
  std::vector<Outgoing> on_tick(Now now);
  // The `npu_run status --dump`s whose deadline has come, answered with what came (on_tick does
  // it too; an in-process rendezvous, which has no ticks, calls it).
  std::vector<Outgoing> answer_due_dumps(Now now);

  Phase phase() const { return phase_; }
  uint64_t round() const { return round_; }
  int restart_count() const { return restart_count_; }
  const JobSettings& settings() const { return settings_; }
  // Set once the job has ended (FINISHED): what every node was told.
  const std::optional<Decision>& final_decision() const { return final_; }
  size_t connected_clients() const { return clients_.size(); }
  size_t joined() const { return pending_.size(); }
  // The nodes of the round running (or last formed), lost and left ones included.
  size_t members() const { return members_.size(); }
  // Said hello and, with a token, proved it: the connection is no longer a stranger's.
  bool authenticated(ClientId id) const;
  // Its join was taken: it waits for a round or is a member of the running one.
  bool has_joined(ClientId id) const { return pending_.contains(id) || member_rank_.contains(id); }
  // Was sent a challenge and has not answered it yet.
  bool awaiting_proof(ClientId id) const;
  // The job as it stands at `now`, for `npu_run status` (state_status.cpp).
  JobStatus status(Now now) const;
  // How many connected agents said, in a heartbeat received at `since` or later, that they
  // reach etcd (an etcd rendezvous; state_memory.cpp).
  size_t clients_reaching_etcd(Clock::time_point since) const;
  // What the job remembers across rounds (state_memory.cpp): what a successor continues from.
  JobMemory memory() const;
  // Continues a job another server ran (etcd: its leader was lost): before any agent is heard.
  void resume(const JobMemory& memory);
  // The nodes taken out since the last call, for the ledger (at most kMaxTakenOutKept).
  std::vector<TakenOut> take_taken_out();
  static constexpr size_t kMaxTakenOutKept = 1024;
  // ---- the timeline (state_timeline.cpp) ----
  // The job's events so far: every node's, as their reports brought them, and the rendezvous'.
  const JobTimeline& timeline() const { return timeline_; }
  // Where the time of each round formed so far went (at most kMaxBlamesKept, the latest).
  const std::vector<RoundBlame>& blames() const { return blames_; }
  // Every decision so far, in order (at most kMaxBlamesKept, the latest).
  const std::vector<Decision>& decisions() const { return decisions_; }
  // The blame of a round formed since the last call, once: what the server logs.
  std::optional<RoundBlame> take_new_blame();
  // The straggler named and still slow (state_stragglers.cpp): status and the metrics.
  std::optional<StragglerStatus> straggler_status() const;
  // The straggler named since the last call, once (state_stragglers.cpp): what the server logs.
  std::optional<NamedStraggler> take_new_straggler() { return std::exchange(straggler_news_, {}); }
  static constexpr size_t kMaxBlamesKept = 10'000;

 private:
  struct Client {
    bool greeted = false;
    std::string agent_nonce;   // from the hello, while a challenge is outstanding
    std::string server_nonce;  // ours, sent in the challenge; empty: none sent
    Clock::time_point last_seen;
    std::optional<Clock::time_point> etcd_ok_at{};  // its last heartbeat saying it reaches etcd
    int64_t hello_ms = 0;                           // wall clock of its hello, for the timeline
    bool seated_before = false;  // its agent's start and contact are on the timeline already
  };
  struct Joiner {
    ClientId id;
    Join join;
    uint64_t arrival;
    std::optional<NodeVerdict> verdict{};            // its last HealthReport for this round
    std::optional<std::vector<PingResult>> pings{};  // its answers to the running ping run
    std::optional<HealthFinding> probe_failure{};    // the pre-flight probe found it slow
    bool told_standby = false;                       // was sent Standby (it is a spare)
    int64_t joined_ms = 0;                           // wall clock of its join's arrival
    int64_t verdict_ms = 0;                          // ... and of its last verdict's
    NodeStatus status(const char* state, int64_t silent_ms) const;  // for npu_run status
  };
  // A seat of the last round: what a spare taking it should match.
  struct SeatMemory {
    std::string host;
    std::string affinity;
    int nproc = 1;
    std::string agent{};   // Join::agent: the job's memory keeps it for a new leader
    TopologyPath place{};  // its holder's; a spare near it is preferred (not kept by a new leader)
  };
  // The device-plane pings among the joiners about to form a round (state_pings.cpp).
  struct PingRun {
    uint64_t id = 0;
    std::vector<ClientId> nodes;  // the ring's order
    std::vector<PingNode> ping_nodes;
    std::vector<std::vector<DevicePing>> plans;
  };
  // Where a joiner stands with the health gate (state_health.cpp).
  enum class Gate { kReady, kChecking, kFailed };
  struct Member {
    ClientId id;
    NodeInfo node;
    int node_rank = 0;
    int rank_offset = 0;
    bool reported = false;
    bool lost = false;
    bool left = false;  // left on purpose (elastic): not told the decision, not in the next round
    std::vector<RankStack> stacks{};      // from its report, after a hang's stack dump
    std::vector<RankBeat> beats{};        // from its last heartbeat that carried them
    Clock::time_point beats_at{};         // when that heartbeat came
    std::optional<NodeVerdict> health{};  // its verdict for this round
    HealthMode health_mode = HealthMode::kOff;
    std::string affinity{};  // Join::affinity
    bool taken_out = false;  // dismissed for a fault of its own: not in the next round
    std::string agent{};     // Join::agent
    NodeStatus status(int64_t silent_ms, Clock::time_point now) const;  // for npu_run status
    // Still in the job: told the round's decision, and seated in the next round.
    bool stays() const { return !lost && !left && !taken_out; }
  };

  std::vector<Outgoing> on_hello(ClientId from, const Hello& hello);
  std::vector<Outgoing> on_auth(ClientId from, const Auth& auth);
  Outgoing welcome(ClientId to);
  std::vector<Outgoing> on_join(ClientId from, const Join& join);
  // The refusal of a join, or nothing when it may go on.
  std::optional<Outgoing> refuse_join(ClientId from, const Join& join) const;
  // A newcomer on a host of the ledger of bad nodes is refused, naming the entry.
  std::optional<Outgoing> ledger_refusal(ClientId from, const Join& join) const;
  std::vector<Outgoing> on_report(ClientId from, const Report& report);
  std::vector<Outgoing> start_round();
  // The step the round's seats restore (rendezvous/state/restore_choice.hpp), from their joins.
  // --sp-block's logical SuperPoDs of the seats (rendezvous/state/node_order.hpp), and the end of a
  // job whose nodes cannot be cut into them.
  Blocks seat_blocks(const std::vector<const Joiner*>& by_rank) const;
  // The round's members from the seated joiners, in node-rank order; returns the world size.
  int seat_members(const std::vector<const Joiner*>& by_rank);
  std::vector<Outgoing> refuse_placement(const std::string& why);
  RestoreChoice restore_point(const std::vector<const Joiner*>& by_rank, int world_size) const;
  static CopyPeer copy_peer(const std::vector<const Joiner*>& by_rank, int node_rank);
  // ---- seats and spares (state_spares.cpp) ----
  // The ready joiners for `seats` node ranks: held seats kept, explicit ranks next, vacated
  // seats to the best spare, the rest by (host, arrival).
  std::vector<const Joiner*> seat_joiners(int seats) const;
  // The seat a joiner keeps (held last round, else its --node-rank), or -1.
  int kept_seat(const Joiner& joiner, int seats) const;
  std::vector<const Joiner*>::iterator best_spare_for(int seat,
                                                      std::vector<const Joiner*>& free) const;
  // A ready joiner that may take a seat now (a named spare waits in the first round).
  bool seat_candidate(const Joiner& joiner) const;
  int seat_candidates() const;
  // How many seats the forming round has: every candidate's, up to max_nodes.
  int round_seats() const;
  // Ready joiners waiting while a round runs: the spares.
  int spares_waiting() const;
  // Ready joiners now, whatever the phase.
  int spares_ready() const;
  // Sends Standby to each ready joiner not told yet (spares only).
  void tell_spares(std::vector<Outgoing>& out);
  // Before the next round: who held which seat, and what a spare for it should match.
  void remember_seats();
  // A node of the last round that is still there has not re-joined yet.
  bool awaiting_seat_holders() const;
  // A ready spare can take seat `node_rank` (-1: any seat).
  bool spare_can_take(int node_rank) const;
  // Records a node taken out of the job for the ledger (not when its host runs another node).
  void take_out(ClientId who, const NodeInfo& node, int node_rank, const std::string& reason,
                const std::string& evidence);
  // The root cause's node is at fault: recorded, and dismissed unless it was lost.
  void dismiss_at_fault(std::vector<Outgoing>& out);
  // The job ended: its spares are told so and leave with 0.
  void dismiss_spares(const Decision& decision, std::vector<Outgoing>& out);
  // ---- the health gate (state_health.cpp) ----
  std::vector<Outgoing> on_health(ClientId from, const HealthReport& report);
  static Gate gate_of(const Joiner& joiner);
  // Starts the round when the joiners allow it: enough of them, every gating joiner's verdict
  // in, none failed in a static job (which then ends: fail_health_gate()).
  std::vector<Outgoing> maybe_start_round();
  // The job checks over the joiners whose verdicts are in: TLS and settings (job_health.hpp);
  // failures are added to those joiners' verdicts; the notes every member is told.
  std::vector<std::string> apply_job_health();
  std::vector<Outgoing> fail_health_gate();
  // A static job with spares enough: the joiners that failed their gate are taken out.
  std::vector<Outgoing> take_out_failed_gates();
  // ---- the device-plane pings (state_pings.cpp) ----
  // Starts the round, or first the pings among the joiners that have device addresses and
  // were not all pinged yet; their reports start it (or end the job) in finish_pings().
  std::vector<Outgoing> ping_or_start_round();
  std::vector<Outgoing> on_ping_report(ClientId from, const PingReport& report);
  // While a ping run is out: finishes it once every asked joiner answered, drops it when one
  // of them left. Nothing (and the round waits) while answers are missing.
  std::optional<std::vector<Outgoing>> continue_pings();
  std::vector<Outgoing> finish_pings();
  // ---- the pre-flight probe (state_probe.cpp) ----
  // Starts the round, or first a probe run when a seat candidate was not probed yet; the run's
  // answers start it (or end the job) in finish_probe().
  std::vector<Outgoing> probe_or_start_round();
  std::vector<Outgoing> on_probe_report(ClientId from, const ProbeReport& report);
  // As continue_pings(), for the probe run out.
  std::optional<std::vector<Outgoing>> continue_probe();
  std::vector<Outgoing> probe_requests();
  std::vector<Outgoing> finish_probe();
  // The job ended: the joiners its health gate kept out are told so, and leave with kExitHealth.
  void release_kept_out(const Decision& decision, std::vector<Outgoing>& out);
  std::string joiner_label(const Joiner& joiner) const;
  bool elastic() const { return settings_.min_nodes < settings_.max_nodes; }
  // Members that will be in the next round: neither lost nor leaving.
  size_t staying_members() const;
  // Elastic: stops every running node so that the job re-forms (a node joined or left); not a
  // failure, so no restart is counted.
  void begin_reform(Reform reform, std::vector<Outgoing>& out);
  // A member whose agent was signalled and leaves: false when that ends the job.
  bool leave(Member& member, const Report& report, ClientId from, std::vector<Outgoing>& out);
  // The join timeout passed: every waiting agent is told who is missing; the job ends.
  std::vector<Outgoing> time_out_joining();
  // Records `failure` as the root cause if it is the first, and stops the other nodes.
  void record_failure(const FailureReport& failure, bool deliberate, ClientId from,
                      std::vector<Outgoing>& out);
  void decide_if_complete(std::vector<Outgoing>& out);
  // The class of this round's root cause and the attempt before's
  // (rendezvous/state/failure_class.hpp).
  Classification classify_round() const;
  // An infrastructure failure costs no restart of --max-restarts when the job goes on without
  // the node at fault.
  bool restart_is_free() const;
  // Clears the finished round's seats and waits for the next round's joins.
  void next_round();
  // A hang's root cause moves to the odd one out of every rank's stack (hang_blame.hpp).
  void blame_hang_on_stacks(Decision& decision);
  std::vector<Outgoing> on_hang_notice(ClientId from, const HangNotice& notice);
  // ---- the timeline (state_timeline.cpp) ----
  // The round formed with `by_rank` seated: their arrivals on the timeline, and the blame.
  void note_formed(const std::vector<const Joiner*>& by_rank);
  // A joiner's arrival on the timeline as node `node`: what the blame reads of it.
  NodeArrival note_arrival(const Joiner& joiner, int node);
  // The joiners that never got a seat (the health gate ended the job): their arrivals.
  void note_unseated();
  void note_report_events(const Member& member, const Report& report);
  void note_decision(const Decision& decision);
  void note_lost(const Member& member, int64_t last_seen_ms);
  TimelineEvent job_event(TimelinePhase phase, int node, const std::string& host) const;
  void note_beats(ClientId from, const std::vector<RankBeat>& ranks);
  // ---- `npu_run status --dump` (state_dumps.cpp) ----
  // Asks every running node for its ranks' records; the answer comes once all sent theirs or
  // at the deadline (answer_due_dumps, from on_tick).
  std::vector<Outgoing> on_dump_query(ClientId from, const StatusQuery& query);
  std::vector<Outgoing> on_records(ClientId from, RecordsCollected records);
  Outgoing dump_answer(LiveDumps::Finished finished) const;
  // ---- stragglers (state_stragglers.cpp) ----
  // The watch starts with each round's workers, over its seats.
  void begin_straggler_watch();
  // A node's sample; scored once a window has passed (the samples are the watch's clock, so an
  // in-process rendezvous without ticks scores too).
  std::vector<Outgoing> on_collective_sample(ClientId from, const CollectiveSample& sample);
  // --straggler replace: the straggler's node leaves, its seat to a ready spare, now; false when
  // no spare is ready (it keeps its seat and is replaced once one is).
  bool replace_straggler(const NamedStraggler& named, std::vector<Outgoing>& out);
  std::vector<Outgoing> lose_client(ClientId who, const std::string& why);
  Member* member_of(ClientId id);
  std::string describe_seats() const;
  std::vector<int> missing_node_ranks() const;

  static Outgoing reject(ClientId to, std::string code, std::string message);

  JobSettings settings_;
  std::function<std::string()> nonce_source_;
  Phase phase_ = Phase::kJoining;
  uint64_t round_ = 0;
  int restart_count_ = 0;
  int charged_restarts_ = 0;                       // restarts counted against --max-restarts
  std::optional<FailureReport> previous_failure_;  // the last round's root cause, if it failed
  int no_progress_restarts_ = 0;                   // restarts in a row that ended without progress
  bool round_progressed_ = false;                  // some node of this round reported progress
  // Every per-message operation is O(1) or O(log n): a 16k-node job joins, reports and leaves
  // without any quadratic scan.
  std::map<ClientId, Client> clients_;
  std::unordered_map<ClientId, Joiner> pending_;     // joined the forming round
  std::unordered_map<int, ClientId> claimed_ranks_;  // explicit --node-rank of pending joiners
  std::vector<Member> members_;                      // indexed by node rank while RUNNING/STOPPING
  std::unordered_map<ClientId, int> member_rank_;
  size_t reported_ = 0;
  std::optional<FailureReport> root_cause_;
  bool membership_change_ = false;  // the nodes are stopping to re-form, not because of a failure
  std::optional<Clock::time_point> min_reached_at_;  // elastic: when the forming round had MIN
  Now now_;                                          // time of the event being handled
  bool deliberate_stop_ = false;  // the root cause is an agent stopped by a signal: no restart
  uint64_t arrivals_ = 0;
  Clock::time_point joining_since_;
  Clock::time_point next_progress_;
  std::optional<Decision> final_;
  std::string job_command_;                // what every agent must run (check_command)
  std::vector<std::string> health_notes_;  // for the round about to start
  std::optional<PingRun> ping_run_;
  uint64_t ping_runs_ = 0;
  std::set<ClientId> pinged_;  // joiners of the last finished ping run, for the round forming
  std::optional<ProbeRun> probe_run_;
  std::vector<ClientId> probe_nodes_;                   // the run's nodes, by its index
  std::unordered_map<ClientId, size_t> probe_index_{};  // ... and the other way
  uint64_t probe_runs_ = 0;
  std::set<std::string> probed_;            // agents (Join::agent, else host/address) probed
  std::vector<std::string> probe_notes_{};  // the last run's, for the round it lets form
  std::vector<SeatMemory> last_seats_;      // by node rank, of the last round
  std::unordered_map<ClientId, int> remembered_seat_;  // held seats, kept in the next round
  // Seats held under a lost leader (resume()), by Join::agent, until their agent joins.
  std::map<std::string, int> resumed_seats_;
  std::vector<TakenOut> taken_out_;       // for the ledger, until taken
  std::set<std::string> ledgered_hosts_;  // taken out in this job
  bool spares_fill_failed_ = false;       // a node failed its gate: named spares may take seats
  JobTimeline timeline_;
  std::vector<RoundBlame> blames_;
  std::vector<Decision> decisions_;
  bool blame_new_ = false;
  int64_t created_ms_ = 0;      // wall clock when this server started: dials before are not late
  int64_t round_began_ms_ = 0;  // when the forming round began: the decision before it
  LiveDumps dumps_;             // `npu_run status --dump`s being collected
  StragglerDesk stragglers_;    // --straggler: the running round's samples and watch
  std::optional<NamedStraggler> straggler_news_;        // named, not logged yet
  std::optional<NamedStraggler> straggler_to_replace_;  // replace: waits for a spare
};

}  // namespace npu_run::rdzv
