// --ship-binary: this npu_run's own executable, read once, with the digest that names it on the
// hosts (a host that has this content already is sent nothing).
#pragma once

#include <memory>
#include <string>

#include "remote/ssh_command.hpp"

namespace npu_run {

struct SelfBinary {
  std::shared_ptr<const std::string> bytes;
  ShippedBinary shipped;
};

// Reads /proc/self/exe. Throws std::runtime_error saying why it cannot.
SelfBinary read_self_binary();

// The absolute path of the running executable.
std::string self_path();

}  // namespace npu_run
