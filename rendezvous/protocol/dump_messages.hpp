// `npu_run status --dump` on the wire: every running rank's records, collected without stopping
// anything. The asker's StatusQuery carries `dump`; the server sends CollectRecords to every
// node of the running round, each agent collects its ranks' flight records and stacks
// (agent/rooms/records_dump_room.cpp) and answers RecordsCollected, and the server answers the
// asker with a JobStatus whose `dump` holds what came back by the deadline and the rank the records
// blame (rendezvous/state/dump_blame.hpp). Neither message is sequenced: one lost with a connection
// is covered by the deadline.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "rendezvous/protocol/message_parts.hpp"

namespace npu_run::rdzv {

// server -> agent: collect your ranks' records for dump `dump` of round `round`.
struct CollectRecords {
  uint64_t dump = 0;
  uint64_t round = 0;
};

// agent -> server: what its ranks gave for dump `dump`.
struct RecordsCollected {
  uint64_t dump = 0;
  std::string directory;  // where the node kept the records (its attempt's dump_<dump>)
  std::string note;       // why there are none ("its workers are not running")
  std::vector<RankStack> stacks;
};

// One node's part of a dump.
struct NodeDump {
  int node_rank = -1;
  std::string host;
  std::string directory;
  std::string note;
  std::vector<RankStack> stacks;  // frames and records; without the recorded calls
};

// The answer to a StatusQuery with `dump`.
struct JobDump {
  uint64_t id = 0;
  std::string error;              // why nothing was collected ("no round is running")
  int64_t took_ms = 0;            // from the query to the answer
  std::vector<NodeDump> nodes;    // those that answered, by node rank
  std::vector<int> silent_nodes;  // node ranks that did not answer in time
  std::string blame;              // the rank the records put apart; empty: none stands apart
  std::vector<int> odd_ranks;     // every rank found apart, the blamed one first
  bool recorded = false;          // some rank had a flight recorder
  int64_t unlisted = 0;           // ranks that answered and are not listed (a large job)
};

}  // namespace npu_run::rdzv
