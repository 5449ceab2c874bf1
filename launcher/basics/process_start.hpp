// When this process started, by the wall clock: what the timeline calls the agent's start, so
// that an agent whose launch came late (a slow ssh, a scheduler's prolog) is seen as late even
// though it measures nothing before main().
#pragma once

#include <cstdint>

namespace npu_run {

// Ms since the epoch: the kernel's start time of this process (/proc/self/stat, in ticks since
// boot, against CLOCK_BOOTTIME now), or, where those cannot be read, the time of the first call.
int64_t process_start_ms();

}  // namespace npu_run
