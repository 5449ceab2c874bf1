#include "rendezvous/protocol/dump_wire.hpp"

#include "rendezvous/protocol/wire_parts.hpp"

namespace npu_run::rdzv {
namespace {

json stacks_json(const std::vector<RankStack>& stacks) {
  json out = json::array();
  for (const RankStack& s : stacks) out.push_back(to_json(s));
  return out;
}

std::vector<RankStack> stacks_from(const Fields& f) {
  std::vector<RankStack> out;
  for (const json& s : f.array("stacks", Limits::kMaxWorkersPerNode, false))
    out.push_back(stack_from(s));
  return out;
}

std::vector<int> ranks_from(const Fields& f, const char* key, size_t max) {
  std::vector<int> out;
  for (const json& r : f.array(key, max, false)) {
    if (!r.is_number_integer() || r.get<int64_t>() < 0 || r.get<int64_t>() > INT32_MAX)
      f.fail(fmt::format("'{}' holds a bad rank", key));
    out.push_back(r.get<int>());
  }
  return out;
}

}  // namespace

json records_json(const RecordsCollected& m) {
  return {{"type", "records"},
          {"dump", m.dump},
          {"directory", m.directory},
          {"note", m.note},
          {"stacks", stacks_json(m.stacks)}};
}

RecordsCollected records_from(const Fields& f) {
  RecordsCollected m;
  m.dump = static_cast<uint64_t>(f.integer("dump", 0, INT64_MAX));
  m.directory = f.text("directory", Limits::kMaxText, false);
  m.note = f.text("note", Limits::kMaxText, false);
  m.stacks = stacks_from(f);
  return m;
}

json collect_json(const CollectRecords& m) {
  return answer("collect", {{"dump", m.dump}, {"round", m.round}});
}

CollectRecords collect_from(const Fields& f) {
  return CollectRecords{static_cast<uint64_t>(f.integer("dump", 0, INT64_MAX)),
                        static_cast<uint64_t>(f.integer("round", 0, INT64_MAX))};
}

json dump_json(const JobDump& d) {
  json nodes = json::array();
  for (const NodeDump& n : d.nodes) {
    nodes.push_back({{"node_rank", n.node_rank},
                     {"host", n.host},
                     {"directory", n.directory},
                     {"note", n.note},
                     {"stacks", stacks_json(n.stacks)}});
  }
  return {{"id", d.id},
          {"error", d.error},
          {"took_ms", d.took_ms},
          {"nodes", std::move(nodes)},
          {"silent_nodes", d.silent_nodes},
          {"blame", d.blame},
          {"odd_ranks", d.odd_ranks},
          {"recorded", d.recorded},
          {"unlisted", d.unlisted}};
}

JobDump dump_from(const json& j) {
  const Fields f(j, "dump");
  JobDump d;
  d.id = static_cast<uint64_t>(f.integer("id", 0, INT64_MAX));
  d.error = f.text("error", Limits::kMaxText, false);
  d.took_ms = f.integer("took_ms", 0, INT64_MAX);
  for (const json& node : f.array("nodes", static_cast<size_t>(Limits::kMaxNodes), false)) {
    const Fields nf(node, "dumped node");
    NodeDump n;
    n.node_rank = static_cast<int>(nf.integer("node_rank", 0, Limits::kMaxNodes));
    n.host = nf.text("host", Limits::kMaxName);
    n.directory = nf.text("directory", Limits::kMaxText, false);
    n.note = nf.text("note", Limits::kMaxText, false);
    n.stacks = stacks_from(nf);
    d.nodes.push_back(std::move(n));
  }
  d.silent_nodes = ranks_from(f, "silent_nodes", static_cast<size_t>(Limits::kMaxNodes));
  d.blame = f.text("blame", Limits::kMaxText, false);
  d.odd_ranks = ranks_from(f, "odd_ranks", Limits::kMaxOddRanks);
  d.recorded = f.find("recorded") != nullptr && f.boolean("recorded");
  d.unlisted = f.optional_integer("unlisted", 0, INT64_MAX).value_or(0);
  return d;
}

}  // namespace npu_run::rdzv
