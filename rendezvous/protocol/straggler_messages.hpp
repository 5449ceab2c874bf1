// Stragglers on the wire (--straggler; rendezvous/state/straggler_desk.hpp decides): while a round
// runs, each agent samples its ranks' flight recorders every third of a window and sends what they
// entered since its last sample (CollectiveSample). Unsequenced: a sample lost with a connection
// costs one window's evidence, never the job. Bounded: a client frame is 64 KiB, so a node sends
// at most kMaxSampledCalls calls and kMaxSampleBytes, the newest, spread over its ranks.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace npu_run::rdzv {

// One collective a rank entered, as its recorder held it when sampled.
struct EnteredCall {
  std::string group;  // the process group (its pg_id, the same on every rank)
  int64_t seq = 0;    // its sequence number in the group
  int64_t entered_ms = 0;
};

struct RankSample {
  int rank = 0;
  std::vector<EnteredCall> calls;
};

struct CollectiveSample {
  uint64_t round = 0;  // a sample of an earlier round is dropped
  std::vector<RankSample> ranks;
};

// The straggler named and still slow, in `npu_run status` and the metrics.
struct StragglerStatus {
  int node_rank = -1;  // -1: a job of one node
  int rank = -1;       // the rank most often last
  std::string host;
  double share = 0;     // of the time its peers waited for it, over the windows that named it
  int64_t cost_ms = 0;  // ... and how long that was
  std::string text;     // the sentence the log has
};

struct StragglerLimits {
  static constexpr size_t kMaxSampledCalls = 2048;  // per sample, all ranks
  static constexpr size_t kMaxGroupText = 16;
  // What a sample may take of a client frame (64 KiB) on the wire: fit_sample() keeps it there.
  static constexpr size_t kMaxSampleBytes = size_t{56} * 1024;
};

}  // namespace npu_run::rdzv
