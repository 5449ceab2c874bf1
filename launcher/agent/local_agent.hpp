// LocalAgent: this node's part in the job, one state machine over the rendezvous and the
// workers. It joins, runs each round's workers (agent/core/attempt.hpp: a fresh Attempt per round),
// reports how they ended, and follows the job's decision, which the rendezvous makes the same way
// for one node or many (rendezvous/state/state.hpp).
//
// Its states, and what moves it from one to the next (nothing else does: every move is checked
// against this table, kTransitions in local_agent.cpp):
//
//   state       event                                    next        what the agent does
//   INIT        start                                    RENDEZVOUS  joins the job
//   RENDEZVOUS  assigned                                 RUNNING     a fresh Attempt: spawns its
//                                                                    workers
//               assigned, but the job cannot run here    REPORTING   reports a fatal failure
//                 (topology, rank table)                             (exit 2 on every node)
//   RUNNING     a failure elsewhere, a re-form, a hang   RUNNING     stops the workers; the
//                 here, a stop signal, the rendezvous                first reason stands, but a
//                 lost                                               signal or a lost rendezvous
//                                                                    overrides it
//               the workers are done                     REPORTING   reports report_for()'s
//                                                                    view of the attempt
//               ... after a stop signal or with the      DONE        summary; 128+N or 125
//                 rendezvous lost
//               the job's decision (its report was lost) RENDEZVOUS  as from REPORTING
//                                                        or DONE
//   REPORTING   decision: restart, or re-form            RENDEZVOUS  joins the next round
//               decision: finish                         DONE        summary, the job's code
//   any         a stop signal without workers, the       DONE        128+N, or 125
//                 rendezvous lost
//
// Around the states: what asks this node to stop (agent/core/stop_requests.hpp: signals, the parent
// watch of a scheduler's step), and the rooms (agent/core/agent_room.hpp): the health gate, the
// progress sockets, the hang watch, the timeline, metrics, each of which hears every transition
// and hands the agent what it found, which the agent decides on.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "agent/core/agent_context.hpp"
#include "agent/core/agent_room.hpp"
#include "agent/link/rendezvous.hpp"
#include "config/launch_config.hpp"

namespace boost::asio {
class io_context;
}

namespace npu_run {

class Guardian;

class LocalAgent {
 public:
  using State = AgentState;
  using FinishedHandler = std::function<void(int exit_code)>;

  LocalAgent(boost::asio::io_context& io, const LaunchConfig& cfg, Rendezvous& rendezvous,
             AgentContext context, Guardian* guardian);
  ~LocalAgent();

  // Joins the job and runs it on the io_context; `on_finished` gets npu_run's exit status once
  // this node is done (the caller decides when to stop the io_context: node 0 may still serve
  // the rendezvous to the other nodes).
  void start(FinishedHandler on_finished);

  // What a received signal does. The agent's own signal_set calls it; tests call it directly.
  void handle_signal(int sig);
  // Stops the job's part on this node as the stop signal `sig` does; `why` says what happened
  // ("the launcher's ssh session closed"). A second call escalates to SIGKILL.
  void stop(int sig, const std::string& why);

  // Whether the table above allows `from` -> `to`.
  static bool allowed(State from, State to);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace npu_run
