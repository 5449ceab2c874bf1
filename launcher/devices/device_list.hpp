// Parsing of device id lists such as "4-7", "0,2,4,6" or "0-1,4-5" (--devices, visible-device
// variables). Ids are kept in the order given: local rank i runs on the i-th id.
#pragma once

#include <string>
#include <vector>

namespace npu_run {

// Throws UsageError naming `what` (the flag or variable the text came from) on malformed text,
// negative or descending ranges, and duplicate ids.
std::vector<int> parse_device_list(const std::string& text, const std::string& what);

// "0-3" for contiguous ids, "0,2,4" otherwise; for messages and plans.
std::string format_device_list(const std::vector<int>& ids);

}  // namespace npu_run
