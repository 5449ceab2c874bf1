// How a node runs its checks and what a failed gate does: settings the launch's options fill
// in (--health-check, --health-timeout, --health-recheck) and the agent reads.
#pragma once

#include <chrono>

namespace npu_run {

struct HealthRunSettings {
  std::chrono::milliseconds call_timeout{15000};  // each tool call (hccn_tool blocks for minutes)
  std::chrono::milliseconds budget{60000};        // all of a node's checks
  int busy_tries = 5;                             // of a call that answers "busy"
  std::chrono::milliseconds busy_pause{200};
};

}  // namespace npu_run
