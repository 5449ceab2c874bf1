// Where the time of a forming round went, in one sentence node 0 logs once the round forms:
// "round 0 formed in 41.2 s: the last node to join was node 17 (host-r), 40.1 s after the
// first; its agent started 39.8 s late". The round waits for its last node; what held that node
// back is the largest of: its agent starting late, its health gate, its connection waiting to be
// let in (redials against the cap on connections that have not joined), or, when none of those
// stands out, nothing is claimed. Pure: the rendezvous hands in what it saw of each node.
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

namespace npu_run::rdzv {

// What the rendezvous saw of one node of the round (wall clock, ms since the epoch; 0: unknown).
struct NodeArrival {
  int node = -1;  // its node rank in the round
  std::string host;
  int64_t agent_start_ms = 0;  // Join::started_ms
  int64_t dialled_ms = 0;      // Join::dialled_ms: when it first tried to connect
  int dials = 1;               // Join::dials: connections it took to be welcomed
  int64_t joined_ms = 0;       // its join arrived
  int64_t verdict_ms = 0;      // its health verdict arrived; 0: none (no gate)
  int64_t gate_ms = 0;         // how long its checks took
  std::string gate_slowest{};  // its slowest check call ("hccn_tool -i 3 -optical -g")
};

enum class BlameCause { kNone, kLateStart, kHealthGate, kHandshake };

struct RoundBlame {
  uint64_t round = 0;
  int64_t began_ms = 0;   // round 0: the first agent's start; later: the decision before
  int64_t formed_ms = 0;  // when it formed
  int nodes = 0;
  int world_size = 0;  // the round's ranks
  int last_node = -1;  // the node the round waited for
  std::string last_host;
  int64_t after_first_ms = 0;  // its readiness after the first node's join
  BlameCause cause = BlameCause::kNone;
  int64_t cause_ms = 0;      // how long the cause took
  std::string cause_detail;  // the gate's slowest call
  std::string sentence;      // the whole line
};

// A cause is named when it took at least this long and a quarter of the wait for the last node.
inline constexpr int64_t kBlameFloorMs = 500;

// The blame of `round`, formed at `formed_ms`, with `nodes` (at least one) and `began_ms`.
// `server_up_ms`: when the rendezvous started listening; dials before then are not its fault.
RoundBlame blame_round(uint64_t round, int64_t began_ms, int64_t formed_ms,
                       const std::vector<NodeArrival>& nodes, int64_t server_up_ms);

const char* cause_name(BlameCause cause);  // "none", "late_start", "health_gate", "handshake"
nlohmann::json to_json(const RoundBlame& blame);

}  // namespace npu_run::rdzv
