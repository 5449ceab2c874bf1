// Whether the job gets anywhere across restarts (--max-no-progress-restarts): each local rank's
// best progress over the attempts so far, by the last number in its beats' text ("step 1200": a
// resumed job counts steps, not beats), else by its beat count.
#pragma once

#include <cstdint>
#include <vector>

#include "workers/progress_beats.hpp"

namespace npu_run {

class ProgressRecord {
 public:
  // Whether some worker beat past its best of the earlier attempts in the attempt `beats` saw;
  // true without beats (nothing to judge by).
  bool progressed(const ProgressBeats* beats);
  // Each rank's beats in attempt `attempt`, at debug level.
  static void log(const ProgressBeats* beats, int attempt);

 private:
  std::vector<int64_t> best_;  // per local rank
};

}  // namespace npu_run
