// A timer that fires long after it was due tells this process that it did not run meanwhile:
// SIGSTOPped, starved of a core by the workers importing torch, its machine or VM paused. A
// silence measured across such a pause is this process's own, not its peers': the frames they
// sent meanwhile wait unread in the socket, and an agent in the same process (node 0's, under
// the rendezvous leader) could not send at all. Whoever judges peers by their silence hears them
// once more before judging (rendezvous/server/server_ticks.cpp) or does not count the pause
// (rendezvous/client/client.cpp).
#pragma once

#include <boost/asio/steady_timer.hpp>
#include <chrono>

namespace npu_run::net {

// Later than this, a timer's lateness is the process's pause, not the loop's ordinary delay.
inline constexpr std::chrono::milliseconds kOwnPauseAfter{500};

// How long `timer`, which has just fired, came after it was due.
inline std::chrono::steady_clock::duration lateness(const boost::asio::steady_timer& timer) {
  return std::chrono::steady_clock::now() - timer.expiry();
}

inline bool fired_after_own_pause(const boost::asio::steady_timer& timer) {
  return lateness(timer) > kOwnPauseAfter;
}

}  // namespace npu_run::net
