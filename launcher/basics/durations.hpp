// A duration as seconds with a fraction, for messages ("within 2.5 s"): one definition for every
// file, so that no two files of a unity batch bring their own.
#pragma once

#include <chrono>

namespace npu_run {

template <typename Rep, typename Period>
double seconds(std::chrono::duration<Rep, Period> d) {
  return std::chrono::duration<double>(d).count();
}

}  // namespace npu_run
