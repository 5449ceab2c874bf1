// /etc/hccn.conf, where Ascend servers record each NPU's network address (`address_N=IP`, N the
// physical device id). Other keys (netmask_N, gateway_N, netdetect_N, ...) are ignored.
#pragma once

#include <map>
#include <string>

namespace npu_run {

inline constexpr const char* kDefaultHccnConf = "/etc/hccn.conf";

// Device id -> IP. Throws UsageError naming `path` and the line for a malformed address line,
// an invalid IP, or a device listed twice.
std::map<int, std::string> parse_hccn_conf(const std::string& text, const std::string& path);

// Reads and parses `path`; throws UsageError naming it when it cannot be read.
std::map<int, std::string> read_hccn_conf(const std::string& path);

}  // namespace npu_run
