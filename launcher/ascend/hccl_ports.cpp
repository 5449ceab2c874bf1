#include "ascend/hccl_ports.hpp"

#include "basics/text.hpp"

namespace npu_run {

PortRange hccl_ports(const EnvMap& env) {
  const int base = static_cast<int>(
      parse_integer(lookup(env, "HCCL_IF_BASE_PORT").value_or(""), 1, 65535 - (kHcclPortCount - 1))
          .value_or(kHcclDefaultBasePort));
  return PortRange{base, base + kHcclPortCount - 1};
}

}  // namespace npu_run
