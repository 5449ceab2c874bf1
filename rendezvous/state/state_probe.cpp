// The pre-flight probe in the rendezvous (--preflight): after the health verdicts and the pings,
// before the round forms, every seat candidate runs its part of a probe run
// (rendezvous/state/probe_run.hpp) when one of them was not probed yet; the round forms once the
// run is over, without the nodes it found slow, which fail their health gate: a static job ends
// with kExitHealth (or a spare takes the seat), an elastic one forms without them.
#include <fmt/format.h>

#include <algorithm>
#include <climits>

#include "rendezvous/protocol/protocol.hpp"
#include "rendezvous/state/state.hpp"

namespace npu_run::rdzv {

namespace {

// What stays the same across a node's reconnections and rounds.
std::string probe_key(const Join& join) {
  return join.agent.empty() ? join.node.host + "/" + join.node.addr : join.agent;
}

}  // namespace

std::vector<Outgoing> RendezvousState::probe_or_start_round() {
  std::vector<Joiner*> nodes;
  for (auto& [id, joiner] : pending_) {
    if (seat_candidate(joiner)) nodes.push_back(&joiner);
  }
  const bool all_probed = std::all_of(nodes.begin(), nodes.end(), [&](const Joiner* j) {
    return probed_.contains(probe_key(j->join));
  });
  if (settings_.preflight == PreflightMode::kOff || nodes.size() < 2 || all_probed)
    return start_round();
  // Neighbours as the seats will roughly be: given ranks first, then by host and arrival.
  std::sort(nodes.begin(), nodes.end(), [](const Joiner* a, const Joiner* b) {
    return std::tuple(a->join.node_rank.value_or(INT_MAX), a->join.node.host, a->arrival) <
           std::tuple(b->join.node_rank.value_or(INT_MAX), b->join.node.host, b->arrival);
  });
  std::vector<ProbeNode> probed;
  probe_nodes_.clear();
  probe_index_.clear();
  for (Joiner* joiner : nodes) {
    joiner->probe_failure.reset();
    probe_index_.emplace(joiner->id, probe_nodes_.size());
    probe_nodes_.push_back(joiner->id);
    probed.push_back(
        {joiner_label(*joiner), joiner->join.node.addr, joiner->join.node.worker_port});
  }
  probe_run_.emplace(++probe_runs_, std::move(probed), settings_.preflight, now_.wall_ms);
  return probe_requests();
}

std::vector<Outgoing> RendezvousState::probe_requests() {
  std::vector<Outgoing> out;
  for (auto& [node, request] : probe_run_->requests())
    out.push_back(Outgoing{{probe_nodes_[node]}, std::move(request), false});
  return out;
}

std::vector<Outgoing> RendezvousState::on_probe_report(ClientId from, const ProbeReport& report) {
  if (member_of(from) != nullptr) return {};  // the round formed without waiting for it
  if (!pending_.contains(from)) {
    clients_.erase(from);
    return {reject(from, "protocol_order", "'probe_report' from an agent that has not joined")};
  }
  if (!probe_run_ || probe_run_->id() != report.run) return {};  // an older run's late answer
  const auto node = probe_index_.find(from);
  if (node == probe_index_.end()) return {};
  ProbeReport cut = report;
  if (cut.detail.size() > Limits::kMaxPingText) cut.detail.resize(Limits::kMaxPingText);
  probe_run_->answer(node->second, cut);
  if (phase_ != Phase::kJoining) return {};
  return maybe_start_round();
}

std::optional<std::vector<Outgoing>> RendezvousState::continue_probe() {
  if (!probe_run_) return std::nullopt;
  const bool all_here = std::all_of(probe_nodes_.begin(), probe_nodes_.end(),
                                    [&](ClientId id) { return pending_.contains(id); });
  if (!all_here) {
    probe_run_.reset();  // one left: the nodes are others now, probed afresh
    return std::nullopt;
  }
  if (!probe_run_->step_done()) return std::vector<Outgoing>{};
  if (probe_run_->advance(now_.wall_ms)) return probe_requests();
  return finish_probe();
}

std::vector<Outgoing> RendezvousState::finish_probe() {
  ProbeRun run = std::move(*probe_run_);
  probe_run_.reset();
  for (size_t i = 0; i < probe_nodes_.size(); ++i) {
    Joiner& joiner = pending_.at(probe_nodes_[i]);
    probed_.insert(probe_key(joiner.join));
    const auto failed = run.failed().find(i);
    if (failed == run.failed().end()) continue;
    std::string line = failed->second;
    const std::string label = joiner_label(joiner) + ": ";
    if (line.rfind(label, 0) == 0) line.erase(0, label.size());
    joiner.probe_failure =
        HealthFinding{"preflight", -1, HealthStatus::kFail, line,
                      "find what slows the node (npu-smi info, thermal throttling, another job's "
                      "processes, a link's errors), or leave it out of the job"};
    if (!joiner.verdict) {
      joiner.verdict = NodeVerdict{};
      joiner.verdict->host = joiner.join.node.host;
    }
    joiner.verdict->findings.push_back(*joiner.probe_failure);
  }
  probe_nodes_.clear();
  probe_index_.clear();
  probe_notes_ = run.notes();
  // Within what an assignment carries: the summary, then the first findings.
  if (probe_notes_.size() > Limits::kMaxHealthNotes) {
    const size_t more = probe_notes_.size() - (Limits::kMaxHealthNotes - 1);
    probe_notes_.resize(Limits::kMaxHealthNotes - 1);
    probe_notes_.push_back(fmt::format("pre-flight probe: and {} more findings", more));
  }
  return maybe_start_round();
}

}  // namespace npu_run::rdzv
