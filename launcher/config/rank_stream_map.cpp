#include "config/rank_stream_map.hpp"

#include <fmt/format.h>

#include "basics/text.hpp"
#include "basics/usage_error.hpp"

namespace npu_run {
namespace {

int parse_field(std::string_view token, int max, const std::string& text, const std::string& flag,
                const char* what) {
  return integer_or_refuse(
      token, 0, max,
      fmt::format("{} '{}': '{}' is not a valid {}; use 0 (none), 1 (stdout), 2 (stderr), 3 "
                  "(both), or a per-local-rank map like 0:3,12:1",
                  flag, text, token, what));
}

}  // namespace

RankStreamMap RankStreamMap::parse(const std::string& text, const std::string& flag) {
  if (text.find(':') == std::string::npos) {
    return RankStreamMap(static_cast<StdStreams>(parse_field(text, 3, text, flag, "stream code")));
  }
  std::map<int, StdStreams> per_rank;
  for (const std::string_view item : split(text, ',')) {
    const auto fields = split(item, ':');
    if (fields.size() != 2) {
      throw UsageError(
          fmt::format("{} '{}': item '{}' is not local_rank:code; a map lists pairs like 0:3,12:1",
                      flag, text, item));
    }
    const int rank = parse_field(fields[0], 1 << 20, text, flag, "local rank");
    const int code = parse_field(fields[1], 3, text, flag, "stream code");
    if (!per_rank.emplace(rank, static_cast<StdStreams>(code)).second) {
      throw UsageError(fmt::format("{} '{}': local rank {} appears twice; give each rank once",
                                   flag, text, rank));
    }
  }
  return RankStreamMap(std::move(per_rank));
}

StdStreams RankStreamMap::for_rank(int local_rank) const {
  if (per_rank_.empty()) return all_;
  const auto it = per_rank_.find(local_rank);
  return it == per_rank_.end() ? StdStreams::kNone : it->second;
}

}  // namespace npu_run
