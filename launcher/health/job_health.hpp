// The checks no node can make alone, over every member's verdict once all are in: the TLS switch
// must be the same on every device of every node (else HCCL's link setup times out between the
// two sides, EI0006), and the settings that must agree on every rank should (HCCL_*, versions,
// the training script). Pure: the rendezvous state machine applies it when a round forms.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "health/verdict.hpp"

namespace npu_run {

struct JobNode {
  std::string label;  // "node 2 (host-c)", as messages name it
  const NodeVerdict* verdict = nullptr;
};

struct JobHealth {
  // By index into the nodes given: why that node fails the job's checks.
  std::map<size_t, std::vector<std::string>> failures;
  // Said in every node's log, once per round.
  std::vector<std::string> warnings;
};

// `strict`: settings that differ fail the nodes outside the majority (--strict-consistency);
// otherwise they are warnings. A TLS switch that differs always fails the minority side.
JobHealth check_job_health(const std::vector<JobNode>& nodes, bool strict);

}  // namespace npu_run
