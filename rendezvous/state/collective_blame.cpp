#include "rendezvous/state/collective_blame.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "rendezvous/protocol/protocol.hpp"

namespace npu_run::rdzv {
namespace {

// One rank's record of one group; `calls` null: the rank recorded none of it (entered 0).
struct GroupMember {
  const RankStack* stack;
  const GroupCalls* calls;
  int64_t entered() const { return calls == nullptr ? 0 : calls->entered; }
  int64_t completed() const { return calls == nullptr ? 0 : calls->completed; }
  const RecordedCall* call(int64_t seq) const {
    if (calls == nullptr) return nullptr;
    for (const RecordedCall& c : calls->last)
      if (c.seq == seq) return &c;
    return nullptr;
  }
};

constexpr const char* kDefaultGroup = "default_pg";

std::string group_text(const std::string& group) {
  return group == kDefaultGroup ? "the default group" : "group '" + group + "'";
}

std::string ranks_text(const std::vector<GroupMember>& members) {
  std::vector<int> ranks;
  for (const GroupMember& m : members) ranks.push_back(m.stack->rank);
  return (ranks.size() == 1 ? "rank " : "ranks ") + rank_list(ranks);
}

std::string where_text(const RankStack& s) {
  if (s.frames.empty() || s.frames.front().starts_with("<")) return "";  // "<no Python frame>"
  return fmt::format("; rank {} is in {}", s.rank, s.frames.front());
}

// 4096 -> "4,096" (no locale: the machine's may not exist).
std::string with_commas(int64_t n) {
  std::string digits = std::to_string(n);
  for (int i = static_cast<int>(digits.size()) - 3; i > (n < 0 ? 1 : 0); i -= 3)
    digits.insert(static_cast<size_t>(i), ",");
  return digits;
}

// "4,096 float32" for one tensor; the recorder's own text for several.
std::string tensor_text(const RecordedCall& c) {
  static const std::map<std::string, std::string> kDtypes{
      {"Float", "float32"}, {"Double", "float64"}, {"Half", "float16"}, {"BFloat16", "bfloat16"},
      {"Int", "int32"},     {"Long", "int64"},     {"Short", "int16"},  {"Char", "int8"},
      {"Byte", "uint8"},    {"Bool", "bool"}};
  if (c.dtypes.empty()) return "";  // barrier: no tensor of the caller's
  const auto sizes = nlohmann::json::parse(c.sizes, nullptr, false);
  const auto dtype = kDtypes.find(c.dtypes);
  if (!sizes.is_array() || sizes.size() != 1 || !sizes[0].is_array() || dtype == kDtypes.end())
    return fmt::format("{} {}", c.sizes, c.dtypes);
  int64_t elements = 1;
  for (const auto& dim : sizes[0]) elements *= dim.is_number_integer() ? dim.get<int64_t>() : 1;
  return fmt::format("{} {}", with_commas(elements), dtype->second);
}

// "all_reduce with 4,096 float32", "barrier".
std::string call_signature(const RecordedCall& c) {
  const std::string tensors = tensor_text(c);
  return tensors.empty() ? c.op : c.op + " with " + tensors;
}

// Every group any recorder saw, the default first, with each recording rank's record of it;
// a rank that recorded nothing of the default group is in it at 0, as every rank is a member.
std::map<std::string, std::vector<GroupMember>> groups_of(const std::vector<const RankStack*>& ss) {
  std::map<std::string, std::vector<GroupMember>> groups;
  for (const RankStack* s : ss)
    for (const GroupCalls& g : s->groups) groups[g.group];
  for (auto& entry : groups) {
    const std::string& name = entry.first;  // clang before 16 cannot capture a binding
    std::vector<GroupMember>& members = entry.second;
    for (const RankStack* s : ss) {
      const auto it = std::find_if(s->groups.begin(), s->groups.end(),
                                   [&](const GroupCalls& g) { return g.group == name; });
      if (it != s->groups.end() || name == kDefaultGroup)
        members.push_back({s, it != s->groups.end() ? &*it : nullptr});
    }
  }
  return groups;
}

CollectiveBlame make_blame(std::vector<const RankStack*> odd, std::string description) {
  std::sort(odd.begin(), odd.end(),
            [](const RankStack* a, const RankStack* b) { return a->rank < b->rank; });
  CollectiveBlame blame{odd.front(), odd, std::move(description)};
  if (blame.odd.size() > Limits::kMaxOddRanks) blame.odd.resize(Limits::kMaxOddRanks);
  return blame;
}

// 1. At the first sequence number two ranks recorded differently: the odd ones out.
std::optional<CollectiveBlame> desync(const std::string& group,
                                      const std::vector<GroupMember>& members) {
  std::set<int64_t> seqs;
  for (const GroupMember& m : members)
    if (m.calls != nullptr)
      for (const RecordedCall& c : m.calls->last) seqs.insert(c.seq);
  for (const int64_t seq : seqs) {
    std::map<std::string, std::vector<GroupMember>> by_call;  // "all_reduce with 4,096 float32"
    for (const GroupMember& m : members)
      if (const RecordedCall* c = m.call(seq)) by_call[call_signature(*c)].push_back(m);
    if (by_call.size() < 2) continue;
    // The call most ranks made (on a tie, rank order decides) is the expected one.
    auto most = by_call.begin();
    for (auto it = by_call.begin(); it != by_call.end(); ++it) {
      if (it->second.size() > most->second.size() ||
          (it->second.size() == most->second.size() &&
           it->second.front().stack->rank < most->second.front().stack->rank))
        most = it;
    }
    std::vector<const RankStack*> odd;
    for (const auto& [call, ranks] : by_call)
      if (call != most->first)
        for (const GroupMember& m : ranks) odd.push_back(m.stack);
    std::sort(odd.begin(), odd.end(),
              [](const RankStack* a, const RankStack* b) { return a->rank < b->rank; });
    std::string culprit_call;
    for (const auto& [call, ranks] : by_call)
      for (const GroupMember& m : ranks)
        if (m.stack == odd.front()) culprit_call = call;
    return make_blame(
        odd, fmt::format("rank {} called {} where {} called {}, as collective #{} "
                         "of {} (a desync){}",
                         odd.front()->rank, culprit_call, ranks_text(most->second), most->first,
                         seq, group_text(group), where_text(*odd.front())));
  }
  return std::nullopt;
}

// "all_reduce #6", or "collective #6" when no rank kept that call.
std::string call_text(const std::vector<GroupMember>& members, int64_t seq) {
  for (const GroupMember& m : members)
    if (const RecordedCall* c = m.call(seq)) return fmt::format("{} #{}", c->op, seq);
  return fmt::format("collective #{}", seq);
}

// How long ago the first of `members` entered `seq`: " 61.0 s ago", or "" when unknown.
std::string entered_ago(const std::vector<GroupMember>& members, int64_t seq) {
  int64_t age = -1;
  for (const GroupMember& m : members)
    if (const RecordedCall* c = m.call(seq)) age = std::max(age, c->age_ms);
  return age < 0 ? "" : fmt::format(" {:.1f} s ago", static_cast<double>(age) / 1e3);
}

// 2. The ranks whose sequence falls behind the furthest: the one furthest behind never entered
// the collective after its last, which the others did.
std::optional<CollectiveBlame> behind(const std::string& group,
                                      const std::vector<GroupMember>& members) {
  int64_t furthest = 0;
  for (const GroupMember& m : members) furthest = std::max(furthest, m.entered());
  std::vector<GroupMember> late;
  for (const GroupMember& m : members)
    if (m.entered() < furthest) late.push_back(m);
  if (late.empty()) return std::nullopt;
  const GroupMember culprit =
      *std::min_element(late.begin(), late.end(), [](const GroupMember& a, const GroupMember& b) {
        return std::make_pair(a.entered(), a.stack->rank) <
               std::make_pair(b.entered(), b.stack->rank);
      });
  const int64_t missed = culprit.entered() + 1;
  std::vector<GroupMember> entered;
  for (const GroupMember& m : members)
    if (m.entered() >= missed) entered.push_back(m);
  std::vector<const RankStack*> odd;
  for (const GroupMember& m : late) odd.push_back(m.stack);
  return make_blame(
      odd, fmt::format("rank {} never entered {} of {}, which {} entered{}{}", culprit.stack->rank,
                       call_text(entered, missed), group_text(group), ranks_text(entered),
                       entered_ago(entered, missed), where_text(*culprit.stack)));
}

// 3. A rank whose server took the question and never answered, while the others did.
std::optional<CollectiveBlame> silent(const std::vector<const RankStack*>& stacks,
                                      const std::string& group,
                                      const std::vector<GroupMember>& members) {
  std::vector<const RankStack*> quiet;
  for (const RankStack* s : stacks)
    if (s->record == RankRecord::kSilent) quiet.push_back(s);
  if (quiet.empty() || members.empty()) return std::nullopt;
  int64_t furthest = 0;
  for (const GroupMember& m : members) furthest = std::max(furthest, m.entered());
  const std::string at = furthest == 0
                             ? std::string("no collective yet")
                             : fmt::format("{} of {} (entered{})", call_text(members, furthest),
                                           group_text(group), entered_ago(members, furthest));
  std::sort(quiet.begin(), quiet.end(),
            [](const RankStack* a, const RankStack* b) { return a->rank < b->rank; });
  return make_blame(
      quiet, fmt::format("rank {} answered nothing through its worker server "
                         "(stopped, or stuck holding the GIL) and never reached "
                         "where {} wait: {}{}",
                         quiet.front()->rank, ranks_text(members), at, where_text(*quiet.front())));
}

// 4. A collective that completed on some ranks and not on others.
std::optional<CollectiveBlame> incomplete(const std::string& group,
                                          const std::vector<GroupMember>& members) {
  int64_t furthest_done = 0;
  for (const GroupMember& m : members) furthest_done = std::max(furthest_done, m.completed());
  int64_t seq = 0;
  for (const GroupMember& m : members)
    if (m.completed() < furthest_done && m.entered() > m.completed())
      seq = seq == 0 ? m.completed() + 1 : std::min(seq, m.completed() + 1);
  if (seq == 0) return std::nullopt;
  std::vector<GroupMember> done;
  std::vector<const RankStack*> stuck;
  for (const GroupMember& m : members) {
    if (m.completed() >= seq) done.push_back(m);
    if (m.completed() < seq && m.entered() >= seq) stuck.push_back(m.stack);
  }
  std::sort(stuck.begin(), stuck.end(),
            [](const RankStack* a, const RankStack* b) { return a->rank < b->rank; });
  return make_blame(stuck,
                    fmt::format("rank {}'s {} of {} never completed, while {} completed "
                                "theirs (its device or link){}",
                                stuck.front()->rank, call_text(members, seq), group_text(group),
                                ranks_text(done), where_text(*stuck.front())));
}

}  // namespace

std::optional<CollectiveBlame> blame_collectives(const std::vector<const RankStack*>& stacks) {
  std::vector<const RankStack*> recorded;
  for (const RankStack* s : stacks)
    if (s->recorder) recorded.push_back(s);
  if (recorded.empty()) return std::nullopt;
  const auto groups = groups_of(recorded);
  // The default group first: std::map orders "default_pg" among the others by name.
  std::vector<const std::pair<const std::string, std::vector<GroupMember>>*> order;
  if (const auto it = groups.find(kDefaultGroup); it != groups.end()) order.push_back(&*it);
  for (const auto& entry : groups)
    if (entry.first != kDefaultGroup) order.push_back(&entry);
  using Check =
      std::optional<CollectiveBlame> (*)(const std::string&, const std::vector<GroupMember>&);
  for (const Check check : {Check{desync}, Check{behind}}) {
    for (const auto* group : order)
      if (auto blame = check(group->first, group->second)) return blame;
  }
  if (!order.empty())
    if (auto blame = silent(stacks, order.front()->first, order.front()->second)) return blame;
  for (const auto* group : order)
    if (auto blame = incomplete(group->first, group->second)) return blame;
  return std::nullopt;
}

std::string rank_list(std::vector<int> ranks) {
  std::sort(ranks.begin(), ranks.end());
  ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
  std::vector<std::string> parts;
  for (size_t i = 0; i < ranks.size();) {
    size_t j = i;
    while (j + 1 < ranks.size() && ranks[j + 1] == ranks[j] + 1) ++j;
    if (j - i >= 2) {
      parts.push_back(fmt::format("{}-{}", ranks[i], ranks[j]));
    } else {
      for (size_t k = i; k <= j; ++k) parts.push_back(std::to_string(ranks[k]));
    }
    i = j + 1;
  }
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i)
    out += (i == 0 ? "" : i + 1 == parts.size() ? " and " : ", ") + parts[i];
  return out;
}

}  // namespace npu_run::rdzv
