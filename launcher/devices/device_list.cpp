#include "devices/device_list.hpp"

#include <fmt/format.h>

#include <set>

#include "basics/text.hpp"
#include "basics/usage_error.hpp"

namespace npu_run {
namespace {

// Upper bound on ids so that "0-99999999" cannot allocate a huge vector; no accelerator
// server has anywhere near this many devices.
constexpr int kMaxDeviceId = 4095;

int parse_id(std::string_view token, const std::string& text, const std::string& what) {
  return integer_or_refuse(token, 0, kMaxDeviceId,
                           fmt::format("{} '{}': '{}' is not a device id (expected an integer "
                                       "0-{}); write lists like 4-7 or 0,2,4,6",
                                       what, text, token, kMaxDeviceId));
}

}  // namespace

std::vector<int> parse_device_list(const std::string& text, const std::string& what) {
  if (text.empty())
    throw UsageError(fmt::format("{} is empty; give ids like 0-7 or 0,2,4,6", what));
  std::vector<int> ids;
  std::set<int> seen;
  for (const std::string_view item : split(text, ',')) {
    const auto range = split(item, '-');
    if (range.size() > 2) {
      throw UsageError(
          fmt::format("{} '{}': '{}' is not a device id or a range like 4-7", what, text, item));
    }
    const int first = parse_id(range.front(), text, what);
    const int last = parse_id(range.back(), text, what);
    if (last < first) {
      throw UsageError(fmt::format("{} '{}': range {} runs backwards; write {}-{}", what, text,
                                   item, last, first));
    }
    for (int id = first; id <= last; ++id) {
      if (!seen.insert(id).second) {
        throw UsageError(
            fmt::format("{} '{}': device {} is listed twice; each local rank needs its own device",
                        what, text, id));
      }
      ids.push_back(id);
    }
  }
  return ids;
}

std::string format_device_list(const std::vector<int>& ids) {
  if (ids.empty()) return "";
  bool contiguous = true;
  for (size_t i = 1; i < ids.size(); ++i) contiguous = contiguous && ids[i] == ids[i - 1] + 1;
  if (contiguous && ids.size() > 1) return fmt::format("{}-{}", ids.front(), ids.back());
  return fmt::format("{}", fmt::join(ids, ","));
}

}  // namespace npu_run
