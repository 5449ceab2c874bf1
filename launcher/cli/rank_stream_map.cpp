#include "npu_run/rank_stream_map.hpp"

#include <fmt/format.h>

#include <charconv>

#include "npu_run/usage_error.hpp"

namespace npu_run {
namespace {

int parse_int(std::string_view token, int max, const std::string& text, const std::string& flag,
              const char* what) {
  int value = -1;
  const auto [end, ec] = std::from_chars(token.data(), token.data() + token.size(), value);
  if (token.empty() || ec != std::errc() || end != token.data() + token.size() || value < 0 ||
      value > max) {
    throw UsageError(fmt::format(
        "{} '{}': '{}' is not a valid {}; use 0 (none), 1 (stdout), 2 (stderr), 3 (both), or a "
        "per-local-rank map like 0:3,12:1",
        flag, text, token, what));
  }
  return value;
}

}  // namespace

RankStreamMap RankStreamMap::parse(const std::string& text, const std::string& flag) {
  if (text.find(':') == std::string::npos) {
    return RankStreamMap(static_cast<StdStreams>(parse_int(text, 3, text, flag, "stream code")));
  }
  std::map<int, StdStreams> per_rank;
  std::string_view rest(text);
  while (true) {
    const auto comma = rest.find(',');
    const std::string_view item = rest.substr(0, comma);
    const auto colon = item.find(':');
    if (colon == std::string_view::npos) {
      throw UsageError(fmt::format(
          "{} '{}': item '{}' lacks a ':'; a map lists local_rank:code pairs like 0:3,12:1", flag,
          text, item));
    }
    const int rank = parse_int(item.substr(0, colon), 1 << 20, text, flag, "local rank");
    const int code = parse_int(item.substr(colon + 1), 3, text, flag, "stream code");
    if (!per_rank.emplace(rank, static_cast<StdStreams>(code)).second) {
      throw UsageError(fmt::format("{} '{}': local rank {} appears twice; give each rank once",
                                   flag, text, rank));
    }
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
  }
  return RankStreamMap(std::move(per_rank));
}

StdStreams RankStreamMap::for_rank(int local_rank) const {
  if (per_rank_.empty()) return all_;
  const auto it = per_rank_.find(local_rank);
  return it == per_rank_.end() ? StdStreams::kNone : it->second;
}

}  // namespace npu_run
