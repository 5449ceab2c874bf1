// What the Ascend tools say of where a node sits (agent/health/topology_probe.hpp runs them), read
// into data: `npu-smi info -t spod-info -i NPU -c CHIP` and `hccn_tool -i N -lldp -g`. A missing
// key is nullopt: the probe then goes without that source.
#pragma once

#include <optional>
#include <string>

namespace npu_run {

// "SDID : 16777216", "Super Pod Size : 384", "Super Pod ID : 0", "Server Index : 4" (Atlas A3;
// padding varies). The SuperPoD's size is not read: its unit differs between products.
struct SpodInfo {
  std::string super_pod_id;
  std::string server_index;  // empty when not printed
  std::optional<int> sdid;   // the die's super device id
};
std::optional<SpodInfo> parse_spod_info(const std::string& text);

// The switch at the other end of a device's port, from the LLDP neighbour the device heard:
// the value under "System Name TLV", else under "Chassis ID TLV" (its "MAC: " dropped). Empty
// output (no neighbour heard) is nullopt.
std::optional<std::string> parse_lldp_switch(const std::string& text);

}  // namespace npu_run
