#include "agent/records/progress_record.hpp"

#include <spdlog/spdlog.h>

namespace npu_run {

bool ProgressRecord::progressed(const ProgressBeats* beats) {
  if (beats == nullptr) return true;
  best_.resize(static_cast<size_t>(beats->local_ranks()), -1);
  bool progressed = false;
  for (int r = 0; r < beats->local_ranks(); ++r) {
    const RankProgress& p = beats->rank(r);
    if (p.beats == 0) continue;
    const int64_t value = progress_value(p);
    int64_t& best = best_[static_cast<size_t>(r)];
    if (value > best) {
      progressed = true;
      best = value;
    }
  }
  return progressed;
}

void ProgressRecord::log(const ProgressBeats* beats, int attempt) {
  if (beats == nullptr || !spdlog::should_log(spdlog::level::debug)) return;
  for (int r = 0; r < beats->local_ranks(); ++r) {
    const RankProgress& p = beats->rank(r);
    spdlog::debug("local rank {}: {} progress beats in attempt {}{}", r, p.beats, attempt,
                  p.beats > 0 ? ", the last '" + p.text + "'" : "");
  }
}

}  // namespace npu_run
