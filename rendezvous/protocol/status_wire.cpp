#include "rendezvous/protocol/status_wire.hpp"

#include "rendezvous/protocol/dump_wire.hpp"
#include "rendezvous/protocol/protocol.hpp"
#include "rendezvous/protocol/wire_parts.hpp"
#include "rendezvous/protocol/wire_shape.hpp"

namespace npu_run::rdzv {
namespace {

using wire::field;
using wire::Presence;

const auto kNodeStatus = wire::part<NodeStatus>(
    field(&NodeStatus::node_rank, "node_rank", wire::Int<int>{-1, Limits::kMaxNodes}),
    field(&NodeStatus::host, "host", wire::Text{Limits::kMaxName}),
    field(&NodeStatus::addr, "addr", wire::Text{Limits::kMaxName}, Presence::kOptional),
    field(&NodeStatus::nproc, "nproc", wire::Int<int>{0, Limits::kMaxWorkersPerNode}),
    field(&NodeStatus::rank_offset, "rank_offset", wire::Int<int>{0, INT32_MAX}),
    field(&NodeStatus::state, "state", wire::Text{32}),
    field(&NodeStatus::silent_ms, "silent_ms", wire::Int<int64_t>{0, INT64_MAX}),
    field(&NodeStatus::ranks, "ranks",
          wire::Array<std::vector<RankBeat>>{Limits::kMaxWorkersPerNode, to_json, beats_from},
          Presence::kOptional),
    field(&NodeStatus::health, "health",
          wire::Maybe<wire::Object<NodeVerdict>>{{verdict_json, verdict_from}}, Presence::kWhenSet),
    field(&NodeStatus::place, "place", wire::Text{Limits::kMaxText}, Presence::kWhenSet));

const auto kStraggler = wire::part<StragglerStatus>(
    field(&StragglerStatus::node_rank, "node_rank", wire::Int<int>{-1, Limits::kMaxNodes}),
    field(&StragglerStatus::rank, "rank", wire::Int<int>{-1, INT32_MAX}),
    field(&StragglerStatus::host, "host", wire::Text{Limits::kMaxName}, Presence::kOptional),
    field(&StragglerStatus::share, "share", wire::Fraction{}),
    field(&StragglerStatus::cost_ms, "cost_ms", wire::Int<int64_t>{0, INT64_MAX}),
    field(&StragglerStatus::text, "text", wire::Text{Limits::kMaxText}, Presence::kOptional));

json node_status_json(const NodeStatus& n) {
  return kNodeStatus.encode(n);
}
NodeStatus node_status_from(const json& j) {
  return kNodeStatus.decode(Fields(j, "node status"));
}
json straggler_json(const StragglerStatus& t) {
  return kStraggler.encode(t);
}
StragglerStatus straggler_from(const json& j) {
  return kStraggler.decode(Fields(j, "straggler"));
}

const auto kStatus = wire::answer_shape<JobStatus>(
    "status", field(&JobStatus::query_id, "query_id", wire::Int<uint64_t>{0, INT64_MAX}),
    field(&JobStatus::run_id, "run_id", wire::Text{Limits::kMaxRunId}),
    field(&JobStatus::phase, "phase", wire::Text{32}),
    field(&JobStatus::round, "round", wire::Int<uint64_t>{0, INT64_MAX}),
    field(&JobStatus::restart_count, "restart_count", wire::Int<int>{0, 1'000'000}),
    field(&JobStatus::max_restarts, "max_restarts", wire::Int<int>{0, 1'000'000}),
    field(&JobStatus::min_nodes, "min_nodes", wire::Int<int>{1, Limits::kMaxNodes}),
    field(&JobStatus::max_nodes, "max_nodes", wire::Int<int>{1, Limits::kMaxNodes}),
    // The round's members and those waiting for the next: twice the job's nodes at most.
    field(&JobStatus::nodes, "nodes",
          wire::List<NodeStatus>{2 * static_cast<size_t>(Limits::kMaxNodes), node_status_json,
                                 node_status_from}),
    field(&JobStatus::missing_nodes, "missing_nodes", wire::Int<int>{0, Limits::kMaxNodes}),
    field(&JobStatus::missing_node_ranks, "missing_node_ranks",
          wire::IntList{Limits::kMaxNodes, INT32_MIN, INT32_MAX, "a non-integer"},
          Presence::kOptional),
    field(&JobStatus::root_cause, "root_cause",
          wire::Maybe<wire::Object<FailureReport>>{{to_json, failure_from}}, Presence::kWhenSet),
    field(&JobStatus::blame, "blame", wire::Text{Limits::kMaxText}, Presence::kWhenSet),
    field(&JobStatus::dump, "dump", wire::Maybe<wire::Object<JobDump>>{{dump_json, dump_from}},
          Presence::kWhenSet),
    field(&JobStatus::straggler, "straggler",
          wire::Maybe<wire::Object<StragglerStatus>>{{straggler_json, straggler_from}},
          Presence::kWhenSet));

}  // namespace

json status_json(const JobStatus& s) {
  return kStatus.encode(s);
}

JobStatus status_from(const Fields& f) {
  return kStatus.decode(f);
}

}  // namespace npu_run::rdzv
