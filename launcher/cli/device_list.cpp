#include "npu_run/device_list.hpp"

#include <fmt/format.h>

#include <charconv>
#include <set>

#include "npu_run/usage_error.hpp"

namespace npu_run {
namespace {

// Upper bound on ids so that "0-99999999" cannot allocate a huge vector; no accelerator
// server has anywhere near this many devices.
constexpr int kMaxDeviceId = 4095;

int parse_id(std::string_view token, const std::string& text, const std::string& what) {
  int value = -1;
  const auto [end, ec] = std::from_chars(token.data(), token.data() + token.size(), value);
  if (token.empty() || ec != std::errc() || end != token.data() + token.size() || value < 0 ||
      value > kMaxDeviceId) {
    throw UsageError(fmt::format(
        "{} '{}': '{}' is not a device id (expected an integer 0-{}); write lists like 4-7 or "
        "0,2,4,6",
        what, text, token, kMaxDeviceId));
  }
  return value;
}

}  // namespace

std::vector<int> parse_device_list(const std::string& text, const std::string& what) {
  std::vector<int> ids;
  std::set<int> seen;
  std::string_view rest(text);
  if (rest.empty())
    throw UsageError(fmt::format("{} is empty; give ids like 0-7 or 0,2,4,6", what));
  while (true) {
    const auto comma = rest.find(',');
    const std::string_view item = rest.substr(0, comma);
    const auto dash = item.find('-');
    int first = 0;
    int last = 0;
    if (dash == std::string_view::npos) {
      first = last = parse_id(item, text, what);
    } else {
      first = parse_id(item.substr(0, dash), text, what);
      last = parse_id(item.substr(dash + 1), text, what);
      if (last < first) {
        throw UsageError(fmt::format("{} '{}': range {} runs backwards; write {}-{}", what, text,
                                     item, last, first));
      }
    }
    for (int id = first; id <= last; ++id) {
      if (!seen.insert(id).second) {
        throw UsageError(
            fmt::format("{} '{}': device {} is listed twice; each local rank needs its own device",
                        what, text, id));
      }
      ids.push_back(id);
    }
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
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
