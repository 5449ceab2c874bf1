#include "rendezvous/protocol/describe.hpp"

#include <fmt/format.h>

#include "basics/text.hpp"

namespace npu_run::rdzv {

std::string describe(const FailureReport& f) {
  std::string text = f.rank >= 0 ? fmt::format("rank {} (local {}, pid {}) on node {} ({})", f.rank,
                                               f.local_rank, f.pid, f.node_rank, f.host)
                     : f.node_rank >= 0 ? fmt::format("node {} ({})", f.node_rank, f.host)
                                        : f.host;  // an agent not yet in a round
  text += ": " + f.description;
  if (f.time_ms > 0)
    text += " at " +
            clock_time(std::chrono::system_clock::time_point(std::chrono::milliseconds(f.time_ms)));
  if (!f.error_message.empty()) text += "; error: " + f.error_message;
  return text;
}

std::string describe(const Reform& r) {
  // A node that left has a rank; a joiner has none yet, and its reason names it.
  if (r.node_rank >= 0) return fmt::format("node {} ({}) {}", r.node_rank, r.host, r.reason);
  return r.reason;
}

}  // namespace npu_run::rdzv
