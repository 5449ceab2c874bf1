// The pre-flight probe's pairing (issue 48 point 3), pure: which nodes run the all_gather probe
// together in each round, and what the figures say. Round 1 pairs neighbours in seat order
// ((0,1), (2,3), ...; an odd last node joins the first pair as a third). A pair over twice the
// median pair's time, or failing, makes both its nodes suspects; round 2 pairs each suspect with
// a node of a good pair. A suspect slow again with a good partner is the slow node; a slow pair
// whose nodes are both fine with good partners is a slow link between them. So a slow node or
// link is found in at most two rounds, whatever the job's size. Each node's own matmul time over
// twice the median names it at once.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace npu_run::rdzv {

using ProbeGroup = std::vector<int>;  // node ranks probed together (2, or 3 for an odd count)

// Round 1's groups for `nodes` nodes (none for a single node).
std::vector<ProbeGroup> first_round(int nodes);

struct GroupTime {
  ProbeGroup nodes;
  double seconds = 0;   // the group's all_gather probe
  bool failed = false;  // it did not finish within the probe's bound, or raised
};

struct ProbeFindings {
  std::vector<int> slow_nodes;                  // in rank order
  std::vector<std::pair<int, int>> slow_links;  // both ends fine with other partners
  std::vector<std::string> lines;               // one per finding, with its figures
  std::vector<ProbeGroup> next_round;           // round 2's groups; empty: done
};

// Reads round 1 (`second` empty) or round 2 (`second` its times) with each node's matmul time
// (by rank; 0: not measured). The lines name node i `labels[i]` ("node i" without labels).
ProbeFindings judge_probe(const std::vector<double>& matmul_seconds,
                          const std::vector<GroupTime>& first,
                          const std::vector<GroupTime>& second = {},
                          const std::vector<std::string>& labels = {});

}  // namespace npu_run::rdzv
