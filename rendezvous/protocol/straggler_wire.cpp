#include "rendezvous/protocol/straggler_wire.hpp"

#include <algorithm>

#include "rendezvous/protocol/protocol.hpp"

namespace npu_run::rdzv {

json sample_json(const CollectiveSample& m) {
  json ranks = json::array();
  for (const RankSample& r : m.ranks) {
    json calls = json::array();
    for (const EnteredCall& c : r.calls)
      calls.push_back(json::array({c.group, c.seq, c.entered_ms}));
    ranks.push_back({{"rank", r.rank}, {"calls", std::move(calls)}});
  }
  return {{"type", "sample"}, {"round", m.round}, {"ranks", std::move(ranks)}};
}

namespace {

// An upper bound of a call's encoded bytes: ["group",seq,ms], both numbers at most 20 digits.
size_t call_bytes(const EnteredCall& c) {
  return c.group.size() + 48;
}
constexpr size_t kRankBytes = 32;    // {"rank":N,"calls":[]},
constexpr size_t kSampleBytes = 64;  // {"type":"sample","round":N,"ranks":[]}

}  // namespace

void fit_sample(CollectiveSample& sample) {
  size_t calls = 0;
  size_t bytes = kSampleBytes;
  for (const RankSample& r : sample.ranks) {
    calls += r.calls.size();
    bytes += kRankBytes;
    for (const EnteredCall& c : r.calls) bytes += call_bytes(c);
  }
  const size_t room =
      StragglerLimits::kMaxSampleBytes - kSampleBytes - kRankBytes * sample.ranks.size();
  if (calls <= StragglerLimits::kMaxSampledCalls && bytes <= StragglerLimits::kMaxSampleBytes)
    return;
  // The share of each rank's calls kept, the smaller of the two limits'.
  const double keep =
      std::min(static_cast<double>(StragglerLimits::kMaxSampledCalls) / static_cast<double>(calls),
               static_cast<double>(room) /
                   static_cast<double>(bytes - kSampleBytes - kRankBytes * sample.ranks.size()));
  for (RankSample& r : sample.ranks) {
    const auto kept = static_cast<size_t>(static_cast<double>(r.calls.size()) * keep);
    r.calls.erase(r.calls.begin(),
                  r.calls.begin() + static_cast<std::ptrdiff_t>(r.calls.size() - kept));
  }
}

namespace {

EnteredCall call_from(const json& triple, const Fields& where) {
  const bool shaped = triple.is_array() && triple.size() == 3 && triple[0].is_string() &&
                      triple[1].is_number_integer() && triple[2].is_number_integer();
  if (!shaped) where.fail("holds a call that is not [group, seq, entered_ms]");
  EnteredCall c{triple[0].get<std::string>(), triple[1].get<int64_t>(), triple[2].get<int64_t>()};
  if (c.group.size() > StragglerLimits::kMaxGroupText || c.seq < 0 || c.entered_ms < 0)
    where.fail("holds a call out of bounds");
  return c;
}

}  // namespace

CollectiveSample sample_from(const Fields& f) {
  CollectiveSample m;
  m.round = static_cast<uint64_t>(f.integer("round", 0, INT64_MAX));
  size_t total = 0;
  for (const json& rank : f.array("ranks", Limits::kMaxWorkersPerNode)) {
    const Fields r(rank, "a sample's rank");
    RankSample& sample = m.ranks.emplace_back();
    sample.rank = static_cast<int>(r.integer("rank", 0, INT32_MAX));
    const json& calls = r.array("calls", StragglerLimits::kMaxSampledCalls);
    total += calls.size();
    if (total > StragglerLimits::kMaxSampledCalls) f.fail("holds too many calls");
    for (const json& call : calls) sample.calls.push_back(call_from(call, r));
  }
  return m;
}

}  // namespace npu_run::rdzv
