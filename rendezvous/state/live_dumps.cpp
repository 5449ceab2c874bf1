#include "rendezvous/state/live_dumps.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <set>

#include "rendezvous/state/dump_blame.hpp"

namespace npu_run::rdzv {
namespace {

LiveDumps::Finished refusal(LiveDumps::Id asker, uint64_t query_id, std::string why) {
  LiveDumps::Finished f{asker, query_id, {}};
  f.dump.error = std::move(why);
  return f;
}

// The answer lists every rank put apart and, up to kMaxListedRanks, the others; the recorded
// calls stay out of it (they went into the blame; the files hold them).
void trim_for_answer(JobDump& dump) {
  const std::set<int> odd(dump.odd_ranks.begin(), dump.odd_ranks.end());
  size_t listed = 0;
  for (NodeDump& node : dump.nodes) {
    std::erase_if(node.stacks, [&](const RankStack& s) {
      const bool keep = odd.contains(s.rank) || listed < LiveDumps::kMaxListedRanks;
      if (keep) ++listed;
      dump.unlisted += keep ? 0 : 1;
      return !keep;
    });
    for (RankStack& s : node.stacks) s.groups.clear();
  }
}

}  // namespace

std::variant<LiveDumps::Begun, LiveDumps::Finished> LiveDumps::ask(Id asker, uint64_t query_id,
                                                                   std::vector<Node> nodes,
                                                                   Time now) {
  if (nodes.empty())
    return refusal(asker, query_id, "no node's workers are running: there is nothing to collect");
  if (pending_.size() >= kMaxPending) {
    return refusal(asker, query_id,
                   fmt::format("{} dumps are being collected already; ask again in a few seconds",
                               pending_.size()));
  }
  Begun begun{next_++, {}};
  Pending& p = pending_[begun.dump];
  p.asker = asker;
  p.query_id = query_id;
  p.asked = now;
  for (Node& n : nodes) {
    begun.nodes.push_back(n.id);
    p.waiting.emplace(n.id, std::move(n));
  }
  return begun;
}

std::optional<LiveDumps::Finished> LiveDumps::take(Id from, RecordsCollected records, Time now) {
  const auto it = pending_.find(records.dump);
  if (it == pending_.end()) return std::nullopt;  // answered already, or never asked
  Pending& p = it->second;
  const auto node = p.waiting.find(from);
  if (node == p.waiting.end()) return std::nullopt;  // not asked, or sent twice
  p.nodes.push_back(NodeDump{node->second.node_rank, node->second.host,
                             std::move(records.directory), std::move(records.note),
                             std::move(records.stacks)});
  p.waiting.erase(node);
  if (!p.waiting.empty()) return std::nullopt;
  Pending done = std::move(p);
  pending_.erase(it);
  return finish(records.dump, std::move(done), now);
}

std::vector<LiveDumps::Finished> LiveDumps::due(Time now) {
  std::vector<Finished> out;
  for (auto it = pending_.begin(); it != pending_.end();) {
    if (now - it->second.asked < kDeadline) {
      ++it;
      continue;
    }
    out.push_back(finish(it->first, std::move(it->second), now));
    it = pending_.erase(it);
  }
  return out;
}

LiveDumps::Finished LiveDumps::finish(uint64_t id, Pending pending, Time now) {
  Finished f{pending.asker, pending.query_id, {}};
  JobDump& d = f.dump;
  d.id = id;
  d.took_ms = std::chrono::duration_cast<std::chrono::milliseconds>(now - pending.asked).count();
  for (const auto& [client, node] : pending.waiting) d.silent_nodes.push_back(node.node_rank);
  std::sort(d.silent_nodes.begin(), d.silent_nodes.end());
  d.nodes = std::move(pending.nodes);
  std::sort(d.nodes.begin(), d.nodes.end(),
            [](const NodeDump& a, const NodeDump& b) { return a.node_rank < b.node_rank; });
  std::vector<const RankStack*> stacks;
  std::vector<std::string> hosts;
  for (const NodeDump& n : d.nodes) {
    for (const RankStack& s : n.stacks) {
      stacks.push_back(&s);
      hosts.push_back(n.host);
    }
  }
  DumpBlame blame = blame_dump(stacks, hosts);
  d.blame = std::move(blame.sentence);
  d.odd_ranks = std::move(blame.odd_ranks);
  d.recorded = blame.recorded;
  trim_for_answer(d);
  return f;
}

}  // namespace npu_run::rdzv
