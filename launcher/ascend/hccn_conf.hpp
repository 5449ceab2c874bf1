// /etc/hccn.conf, where Ascend servers record each NPU's network address (`address_N=IP`, N the
// physical device id). Other keys (netmask_N, gateway_N, netdetect_N, ...) are ignored.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace npu_run {

inline constexpr const char* kDefaultHccnConf = "/etc/hccn.conf";

// Device id -> IP. Throws UsageError naming `path` and the line for a malformed address line,
// an invalid IP, or a device listed twice.
std::map<int, std::string> parse_hccn_conf(const std::string& text, const std::string& path);

// Reads and parses `path`; throws UsageError naming it when it cannot be read.
std::map<int, std::string> read_hccn_conf(const std::string& path);

// "address_N" for each of `devices` that `addresses` lacks, in device order.
std::vector<std::string> missing_addresses(const std::map<int, std::string>& addresses,
                                           const std::vector<int>& devices);

// The address of each of `devices`, in that order, from `addresses` (read from `path`). When some
// are missing, throws UsageError "CONTEXT: PATH has no address_4, address_5 for FOR_WHOM; FIX"
// (no "CONTEXT: " when `context` is empty).
std::vector<std::string> device_addresses(const std::map<int, std::string>& addresses,
                                          const std::vector<int>& devices, const std::string& path,
                                          const std::string& context, const std::string& for_whom,
                                          const std::string& fix);

}  // namespace npu_run
