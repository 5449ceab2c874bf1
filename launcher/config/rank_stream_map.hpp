// Which standard streams of which local rank a --redirects / --tee value selects.
// Same syntax as torchrun ("3", or "0:3,12:1") but local ranks may have several digits.
#pragma once

#include <cstdint>
#include <map>
#include <string>

namespace npu_run {

// torchrun's numbering: 0 none, 1 stdout, 2 stderr, 3 both.
enum class StdStreams : uint8_t { kNone = 0, kOut = 1, kErr = 2, kBoth = 3 };

inline bool has_stdout(StdStreams s) {
  return (static_cast<uint8_t>(s) & 1) != 0;
}
inline bool has_stderr(StdStreams s) {
  return (static_cast<uint8_t>(s) & 2) != 0;
}

class RankStreamMap {
 public:
  RankStreamMap() = default;
  explicit RankStreamMap(StdStreams all) : all_(all) {}
  RankStreamMap(std::map<int, StdStreams> per_rank) : per_rank_(std::move(per_rank)) {}

  // Throws UsageError naming `flag` for malformed values, codes outside 0-3, repeated ranks.
  static RankStreamMap parse(const std::string& text, const std::string& flag);

  StdStreams for_rank(int local_rank) const;
  bool empty() const { return all_ == StdStreams::kNone && per_rank_.empty(); }
  // Largest local rank named explicitly, or -1; lets the caller reject ranks that do not exist.
  int highest_named_rank() const { return per_rank_.empty() ? -1 : per_rank_.rbegin()->first; }

 private:
  StdStreams all_ = StdStreams::kNone;
  std::map<int, StdStreams> per_rank_;
};

}  // namespace npu_run
