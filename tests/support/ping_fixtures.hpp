// What the device-ping tests share: a node's device addresses and the answers to a plan of
// pings (tests/unit/test_device_pings.cpp, test_ping_rounds.cpp).
#pragma once

#include <fmt/format.h>

#include <algorithm>
#include <string>
#include <vector>

#include "health/device_pings.hpp"
#include "rendezvous/state/state.hpp"

namespace npu_run::testing::ping_fixtures {

inline const rdzv::Now t0{rdzv::Clock::time_point{}, 1'700'000'000'000};

// Node n's devices 0..count-1 at 10.0.n.(10+d).
inline std::vector<DeviceIp> addresses(int node, int count = 8) {
  std::vector<DeviceIp> ips;
  for (int d = 0; d < count; ++d) ips.push_back({d, fmt::format("10.0.{}.{}", node, 10 + d)});
  return ips;
}

// Every planned ping reached, except those from `from` to an address in `dead`.
inline std::vector<std::vector<PingResult>> answers(
    const std::vector<std::vector<DevicePing>>& plans, const std::vector<std::string>& dead) {
  std::vector<std::vector<PingResult>> out(plans.size());
  for (size_t n = 0; n < plans.size(); ++n) {
    for (const DevicePing& p : plans[n]) {
      const bool lost = std::find(dead.begin(), dead.end(), p.ip) != dead.end();
      out[n].push_back({p.device, p.ip, lost ? PingAnswer::kUnreached : PingAnswer::kReached,
                        lost ? "recv time out seq=0" : "3 packets transmitted, 3 received"});
    }
  }
  return out;
}

}  // namespace npu_run::testing::ping_fixtures
