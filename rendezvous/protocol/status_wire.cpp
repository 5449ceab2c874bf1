#include "rendezvous/protocol/status_wire.hpp"

#include "rendezvous/protocol/dump_wire.hpp"
#include "rendezvous/protocol/protocol.hpp"
#include "rendezvous/protocol/wire_parts.hpp"

namespace npu_run::rdzv {

json status_json(const JobStatus& s) {
  json nodes = json::array();
  for (const NodeStatus& n : s.nodes) {
    json node = {{"node_rank", n.node_rank},
                 {"host", n.host},
                 {"addr", n.addr},
                 {"nproc", n.nproc},
                 {"rank_offset", n.rank_offset},
                 {"state", n.state},
                 {"silent_ms", n.silent_ms},
                 {"ranks", to_json(n.ranks)}};
    if (n.health) node["health"] = verdict_json(*n.health);
    if (!n.place.empty()) node["place"] = n.place;
    nodes.push_back(std::move(node));
  }
  json j = answer("status", {{"query_id", s.query_id},
                             {"run_id", s.run_id},
                             {"phase", s.phase},
                             {"round", s.round},
                             {"restart_count", s.restart_count},
                             {"max_restarts", s.max_restarts},
                             {"min_nodes", s.min_nodes},
                             {"max_nodes", s.max_nodes},
                             {"nodes", std::move(nodes)},
                             {"missing_nodes", s.missing_nodes},
                             {"missing_node_ranks", s.missing_node_ranks}});
  if (s.root_cause) j["root_cause"] = to_json(*s.root_cause);
  if (!s.blame.empty()) j["blame"] = s.blame;
  if (s.dump) j["dump"] = dump_json(*s.dump);
  if (s.straggler) {
    const StragglerStatus& t = *s.straggler;
    j["straggler"] = {{"node_rank", t.node_rank}, {"rank", t.rank},       {"host", t.host},
                      {"share", t.share},         {"cost_ms", t.cost_ms}, {"text", t.text}};
  }
  return j;
}

namespace {

StragglerStatus straggler_from(const Fields& f) {
  StragglerStatus t;
  t.node_rank = static_cast<int>(f.integer("node_rank", -1, Limits::kMaxNodes));
  t.rank = static_cast<int>(f.integer("rank", -1, INT32_MAX));
  t.host = f.text("host", Limits::kMaxName, false);
  const json& share = f.need("share");
  if (!share.is_number() || share.get<double>() < 0 || share.get<double>() > 1)
    f.fail("'share' is not a number from 0 to 1");
  t.share = share.get<double>();
  t.cost_ms = f.integer("cost_ms", 0, INT64_MAX);
  t.text = f.text("text", Limits::kMaxText, false);
  return t;
}

}  // namespace

JobStatus status_from(const Fields& f) {
  JobStatus s;
  s.query_id = static_cast<uint64_t>(f.integer("query_id", 0, INT64_MAX));
  s.run_id = f.text("run_id", Limits::kMaxRunId);
  s.phase = f.text("phase", 32);
  s.round = static_cast<uint64_t>(f.integer("round", 0, INT64_MAX));
  s.restart_count = static_cast<int>(f.integer("restart_count", 0, 1'000'000));
  s.max_restarts = static_cast<int>(f.integer("max_restarts", 0, 1'000'000));
  s.min_nodes = static_cast<int>(f.integer("min_nodes", 1, Limits::kMaxNodes));
  s.max_nodes = static_cast<int>(f.integer("max_nodes", 1, Limits::kMaxNodes));
  for (const json& node : f.array("nodes", 2 * static_cast<size_t>(Limits::kMaxNodes))) {
    const Fields nf(node, "node status");
    NodeStatus n;
    n.node_rank = static_cast<int>(nf.integer("node_rank", -1, Limits::kMaxNodes));
    n.host = nf.text("host", Limits::kMaxName);
    n.addr = nf.text("addr", Limits::kMaxName, false);
    n.nproc = static_cast<int>(nf.integer("nproc", 0, Limits::kMaxWorkersPerNode));
    n.rank_offset = static_cast<int>(nf.integer("rank_offset", 0, INT32_MAX));
    n.state = nf.text("state", 32);
    n.silent_ms = nf.integer("silent_ms", 0, INT64_MAX);
    n.ranks = beats_from(nf.array("ranks", Limits::kMaxWorkersPerNode, false));
    if (nf.find("health") != nullptr) n.health = verdict_from(nf.object("health"));
    n.place = nf.text("place", Limits::kMaxText, false);
    s.nodes.push_back(std::move(n));
  }
  s.missing_nodes = static_cast<int>(f.integer("missing_nodes", 0, Limits::kMaxNodes));
  for (const json& r : f.array("missing_node_ranks", Limits::kMaxNodes, false)) {
    if (!r.is_number_integer()) f.fail("'missing_node_ranks' holds a non-integer");
    s.missing_node_ranks.push_back(r.get<int>());
  }
  if (f.find("root_cause") != nullptr) s.root_cause = failure_from(f.object("root_cause"));
  s.blame = f.text("blame", Limits::kMaxText, false);
  if (f.find("dump") != nullptr) s.dump = dump_from(f.object("dump"));
  if (f.find("straggler") != nullptr)
    s.straggler = straggler_from(Fields(f.object("straggler"), "straggler"));
  return s;
}

}  // namespace npu_run::rdzv
