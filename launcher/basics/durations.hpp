// Small time helpers with one definition for every file, so that no two files of a unity batch
// bring their own.
#pragma once

#include <chrono>
#include <cstdint>

namespace npu_run {

template <typename Rep, typename Period>
double seconds(std::chrono::duration<Rep, Period> d) {
  return std::chrono::duration<double>(d).count();
}

// The wall clock in milliseconds since the epoch: what the job's memory and its records carry.
inline int64_t wall_now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

}  // namespace npu_run
