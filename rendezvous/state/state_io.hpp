// What goes into the rendezvous state machine (rendezvous/state/state.hpp) and what comes out of
// it: the clocks of an event, the job's settings, the messages it addresses, the nodes it takes
// out.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "rendezvous/protocol/messages.hpp"
#include "rendezvous/state/node_order.hpp"

namespace npu_run::rdzv {

using ClientId = uint64_t;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// When an event happens: the steady clock for deadlines, and the wall clock (ms since the epoch)
// for the times failures carry, which nodes compare with each other.
struct Now {
  Clock::time_point steady;
  int64_t wall_ms = 0;
};
// Both clocks, read now.
Now now();
// Both clocks advanced by `d`: simulated time for tests and the fuzzer.
template <typename Rep, typename Period>
Now operator+(Now at, std::chrono::duration<Rep, Period> d) {
  at.steady += std::chrono::duration_cast<Clock::duration>(d);
  at.wall_ms += std::chrono::duration_cast<milliseconds>(d).count();
  return at;
}

struct JobSettings {
  std::string run_id = "none";
  // Shared secret agents must prove they know (`rendezvous/protocol/auth.hpp`); empty: agents must
  // have none.
  std::string token;
  int min_nodes = 1;
  int max_nodes = 1;
  int max_restarts = 0;
  // Finish with kExitNoProgress once this many restarts in a row made no progress (no node
  // reported Report::progressed); 0: never.
  int max_no_progress_restarts = 0;
  milliseconds heartbeat_interval{5'000};
  milliseconds heartbeat_timeout{30'000};
  milliseconds progress_interval{5'000};
  milliseconds join_timeout{900'000};
  milliseconds last_call{30'000};  // elastic: wait this long for more nodes once MIN joined
  // Agents must run this command (Join::command). Empty: the first join's. Only checked with the
  // default run id: a job whose nodes run different commands names itself with --rdzv-id.
  std::string command;
  bool check_command = false;
  // Settings that differ between nodes fail the odd ones out of the health gate instead of
  // being warned of (--strict-consistency).
  bool strict_consistency = false;
  // Agents beyond max_nodes that join as spares (--spares); a lost or faulty node's seat goes
  // to one of them.
  int spares = 0;
  // The ledger of bad nodes: host -> what its entry says. Agents on these hosts are refused.
  std::map<std::string, std::string> ledger;
  // The order of free seats (--node-order) and the logical SuperPoD blocks (--sp-block, devices
  // per block; 0: none cut): rendezvous/state/node_order.hpp.
  NodeOrder node_order = NodeOrder::kTopology;
  int sp_block = 0;
  // --preflight: the probe every node runs before a round with a node not probed yet
  // (rendezvous/state/probe_run.hpp); off: none.
  PreflightMode preflight = PreflightMode::kOff;
  // --straggler, --straggler-window: the watch over the agents' samples of their flight
  // recorders (rendezvous/state/straggler_desk.hpp); replace hands a straggler's seat to a ready
  // spare.
  StragglerSettings straggler{};
};

// A node taken out of the job (lost, a failed health gate, a device fault): what the ledger of
// bad nodes records (the agent writes it: agent/node_ledger.hpp).
struct TakenOut {
  std::string host;
  std::string addr;
  int node_rank = -1;
  int64_t time_ms = 0;
  std::string reason;    // "lost", "failed its health gate", "infrastructure fault"
  std::string evidence;  // the description, the fault line, the failed check
};

struct Outgoing {
  std::vector<ClientId> to;
  ServerMessage message;
  bool close_after = false;  // the connections are closed once the message has been sent
};

}  // namespace npu_run::rdzv
