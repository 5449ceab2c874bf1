// The dumps `npu_run status --dump` asked for that are still being collected
// (rendezvous/protocol/dump_messages.hpp): who asked, which nodes were asked, what each sent back.
// A dump is answered once every asked node sent its records, or at its deadline with what came.
// Bounded: at most kMaxPending at once (each holds at most a client frame per node), and a node's
// records count once, for a dump it was asked for. Pure: the state machine hands in the time.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "rendezvous/protocol/messages.hpp"

namespace npu_run::rdzv {

class LiveDumps {
 public:
  using Id = uint64_t;  // the agents' ClientId
  using Time = std::chrono::steady_clock::time_point;

  struct Node {
    Id id = 0;
    int node_rank = 0;
    std::string host;
  };
  // A dump to answer: to `asker`, for its query `query_id`.
  struct Finished {
    Id asker = 0;
    uint64_t query_id = 0;
    JobDump dump;
  };
  // A dump begun: CollectRecords{dump, round} goes to `nodes`.
  struct Begun {
    uint64_t dump = 0;
    std::vector<Id> nodes;
  };

  static constexpr size_t kMaxPending = 2;
  // The agents' collection takes 3 s at most (agent/hangs/hang_collection.hpp); the rest is the
  // way.
  static constexpr std::chrono::milliseconds kDeadline{4500};
  // Ranks whose stacks the answer lists, the ranks put apart always among them.
  static constexpr size_t kMaxListedRanks = 1024;

  // A dump asked by `asker` of the running round's `nodes`; answered at once when it cannot be
  // made (no node runs, too many under way).
  std::variant<Begun, Finished> ask(Id asker, uint64_t query_id, std::vector<Node> nodes, Time now);
  // `from`'s records: the dump they finish, if they were the last it waited for.
  std::optional<Finished> take(Id from, RecordsCollected records, Time now);
  // The dumps whose deadline has come, with what they have.
  std::vector<Finished> due(Time now);
  size_t pending() const { return pending_.size(); }

 private:
  struct Pending {
    Id asker = 0;
    uint64_t query_id = 0;
    Time asked;
    std::map<Id, Node> waiting;  // asked, not answered yet
    std::vector<NodeDump> nodes;
  };
  static Finished finish(uint64_t id, Pending pending, Time now);

  std::map<uint64_t, Pending> pending_;
  uint64_t next_ = 1;
};

}  // namespace npu_run::rdzv
