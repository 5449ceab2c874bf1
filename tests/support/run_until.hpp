// Runs an io_context in short turns until a condition holds: for unit tests that drive real
// sockets and timers on the test's own thread.
#pragma once

#include <boost/asio/io_context.hpp>
#include <chrono>

namespace npu_run::testing {

// Runs `io` until `done` holds (asked once per turn: it may consume what it checks) or `limit`
// passes; true when it held.
template <typename Done>
bool run_until(boost::asio::io_context& io, Done done, std::chrono::milliseconds limit) {
  const auto until = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < until) {
    if (done()) return true;
    io.run_for(std::chrono::milliseconds(10));
    io.restart();
  }
  return done();
}

}  // namespace npu_run::testing
