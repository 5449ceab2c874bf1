// `npu_run status --dump` in the state machine: the running round's nodes are asked for their
// ranks' records (CollectRecords), and the asker gets the job's status with the dump
// (rendezvous/state/live_dumps.hpp keeps the dumps under way).
#include <fmt/format.h>

#include "rendezvous/state/state.hpp"

namespace npu_run::rdzv {

std::vector<Outgoing> RendezvousState::on_dump_query(ClientId from, const StatusQuery& query) {
  if (phase_ != Phase::kRunning) {
    LiveDumps::Finished refused{from, query.id, {}};
    refused.dump.error =
        phase_ == Phase::kJoining
            ? "the job is waiting for its nodes: no worker runs yet"
            : fmt::format("the job is {}: its workers are being stopped or are done",
                          phase_ == Phase::kStopping ? "stopping" : "finished");
    return {dump_answer(std::move(refused))};
  }
  std::vector<LiveDumps::Node> nodes;
  for (const Member& m : members_) {
    if (!m.reported && !m.lost && !m.left) nodes.push_back({m.id, m.node_rank, m.node.host});
  }
  auto asked = dumps_.ask(from, query.id, std::move(nodes), now_.steady);
  if (auto* refused = std::get_if<LiveDumps::Finished>(&asked))
    return {dump_answer(std::move(*refused))};
  const auto& begun = std::get<LiveDumps::Begun>(asked);
  return {Outgoing{begun.nodes, CollectRecords{begun.dump, round_}, false}};
}

std::vector<Outgoing> RendezvousState::on_records(ClientId from, RecordsCollected records) {
  if (auto finished = dumps_.take(from, std::move(records), now_.steady))
    return {dump_answer(std::move(*finished))};
  return {};
}

std::vector<Outgoing> RendezvousState::answer_due_dumps(Now now) {
  now_ = now;
  std::vector<Outgoing> out;
  for (LiveDumps::Finished& finished : dumps_.due(now.steady))
    out.push_back(dump_answer(std::move(finished)));
  return out;
}

// The job's status as of now, with the dump; a connection of `npu_run status` of its own (one
// that never joined) is closed by it.
Outgoing RendezvousState::dump_answer(LiveDumps::Finished finished) const {
  JobStatus answer = status(now_);
  answer.query_id = finished.query_id;
  answer.dump = std::move(finished.dump);
  return Outgoing{{finished.asker}, std::move(answer), !has_joined(finished.asker)};
}

}  // namespace npu_run::rdzv
