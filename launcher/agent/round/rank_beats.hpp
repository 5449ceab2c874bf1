// Each local rank's progress beats as of one moment, in the rendezvous' words (rdzv::RankBeat):
// what a hang's report, the failure summary and `npu_run status` say of where a rank got to.
#pragma once

#include <chrono>
#include <vector>

#include "rendezvous/protocol/messages.hpp"

namespace npu_run {

class ProgressBeats;

// One per local rank, in order; age_ms from `at` (-1 for a rank that never beat; 0 for a beat
// stamped after `at`: beats are stamped when collected, up to 5 ms after they were sent).
std::vector<rdzv::RankBeat> rank_beats(const ProgressBeats& beats,
                                       std::chrono::steady_clock::time_point at);

}  // namespace npu_run
