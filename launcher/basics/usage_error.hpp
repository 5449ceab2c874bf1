// The error type for bad input from the user (flags, env, files named by flags).
// Everything that throws it ends the launch with exit code 2 before any worker starts.
#pragma once

#include <stdexcept>
#include <string>

#include "basics/exit_status.hpp"  // kExitUsage

namespace npu_run {

class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// The rendezvous cannot start as configured (its port served by another job, say): the launch
// ends with kExitRendezvous before any worker starts.
class RendezvousConflict : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

}  // namespace npu_run
