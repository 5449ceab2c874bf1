// The interface through which the agent learns its Assignment for each round. The agent depends
// only on this; a single node uses StandaloneRendezvous, multi-node jobs a TCP client.
#pragma once

#include <functional>

#include "npu_run/assignment.hpp"

namespace npu_run {

class Rendezvous {
 public:
  using AssignedHandler = std::function<void(const Assignment&)>;
  virtual ~Rendezvous() = default;
  // Joins the next round and calls `on_assigned` from the agent's io_context.
  virtual void async_next_round(AssignedHandler on_assigned) = 0;
};

}  // namespace npu_run
