#include "agent/round/rank_beats.hpp"

#include <algorithm>

#include "workers/progress_beats.hpp"

namespace npu_run {

std::vector<rdzv::RankBeat> rank_beats(const ProgressBeats& beats,
                                       std::chrono::steady_clock::time_point at) {
  std::vector<rdzv::RankBeat> out;
  for (int r = 0; r < beats.local_ranks(); ++r) {
    const RankProgress& p = beats.rank(r);
    rdzv::RankBeat& b = out.emplace_back();
    b.local_rank = r;
    b.beats = p.beats;
    if (p.beats == 0) continue;
    b.text = p.text;
    b.age_ms = std::max<int64_t>(
        0, std::chrono::duration_cast<std::chrono::milliseconds>(at - p.last).count());
  }
  return out;
}

}  // namespace npu_run
