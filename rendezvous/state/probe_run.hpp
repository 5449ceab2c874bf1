// One run of the pre-flight probe (--preflight) over the nodes about to form a round, pure: the
// steps, each node's request, the answers, and what the figures say
// (rendezvous/state/preflight_pairs.hpp judges). Step 1 asks every node for its devices' matmul and
// an all_gather with its neighbour; step 2, only when a pair was slow or failed, pairs each suspect
// with a good node; step 3
// (--preflight full) runs the all_gather over every node left. A node over twice the median, or
// failing, is named with its figures; the state machine fails its health gate
// (rendezvous/state/state_probe.cpp).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "health/gate_settings.hpp"
#include "rendezvous/protocol/probe_messages.hpp"
#include "rendezvous/state/preflight_pairs.hpp"

namespace npu_run::rdzv {

struct ProbeNode {
  std::string label;  // "node 2 (host-c)", for the lines
  std::string addr;   // where its probe serves torch's store when it leads a group
  int port = 0;       // its held port
};

class ProbeRun {
 public:
  // A run of at least two nodes (in the order their seats will roughly take).
  ProbeRun(uint64_t id, std::vector<ProbeNode> nodes, PreflightMode mode, int64_t now_ms);

  uint64_t id() const { return id_; }
  int step() const { return step_; }
  // This step's requests by node index; nodes outside its groups are not asked.
  std::vector<std::pair<size_t, ProbeRequest>> requests() const;
  // An asked node's answer to this step; others are ignored.
  void answer(size_t node, const ProbeReport& report);
  // Every node asked in this step answered.
  bool step_done() const;
  // Judges the step that is done: true when another step follows (its requests()), false when
  // the run is over (failed(), notes()).
  bool advance(int64_t now_ms);

  // Once over: the nodes that fail (index -> the line that names it, with its figures).
  const std::map<size_t, std::string>& failed() const { return failed_; }
  // Once over: what the run measured and found, for every node's log.
  const std::vector<std::string>& notes() const { return notes_; }

  // The probe's bound on one step of a node (torch's import included).
  static int timeout_ms(PreflightMode mode) {
    return mode == PreflightMode::kFull ? 120'000 : 60'000;
  }

 private:
  std::vector<GroupTime> group_times() const;
  std::vector<std::string> labels() const;
  // The nodes the findings fail (failed_), then the notes once the run is over.
  void fail_nodes(const ProbeFindings& findings);
  void finish(const ProbeFindings& findings, int64_t now_ms);
  // The line for a node that fails, with what its own probe said when it failed.
  std::string with_detail(size_t node, const std::string& line) const;

  uint64_t id_;
  std::vector<ProbeNode> nodes_;
  PreflightMode mode_;
  int64_t started_ms_;
  int step_ = 1;
  // This step's groups, which nodes they ask, and how many answers are still missing: each answer
  // and the check for the last are O(1), for a 16k-node job.
  void ask(std::vector<ProbeGroup> groups);
  std::vector<ProbeGroup> groups_;
  std::vector<bool> asked_;
  size_t missing_ = 0;
  std::vector<std::optional<ProbeReport>> answers_;  // this step's, by node
  std::vector<double> matmul_;                       // step 1's, by node (0: not measured)
  std::vector<std::string> failures_;                // what a node's probe said when it failed
  std::vector<GroupTime> first_;                     // step 1's groups
  std::vector<GroupTime> second_;                    // step 2's
  std::optional<ProbeFindings> findings_;            // after steps 1 and 2
  std::optional<GroupTime> whole_;                   // step 3's
  std::map<size_t, std::string> failed_;
  std::vector<std::string> notes_;
};

}  // namespace npu_run::rdzv
