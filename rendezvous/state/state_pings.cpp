// The device-plane pings in the rendezvous: between the health verdicts and the round, the
// joiners that know their device addresses ping each other's devices (health/device_pings.hpp);
// the round forms once every answer is in, without the nodes an unreached pair failed.
#include <algorithm>
#include <climits>

#include "rendezvous/protocol/protocol.hpp"
#include "rendezvous/state/state.hpp"

namespace npu_run::rdzv {

namespace {

bool has_addresses(const std::optional<NodeVerdict>& verdict) {
  return verdict && !verdict->device_ips.empty();
}

}  // namespace

std::vector<Outgoing> RendezvousState::ping_or_start_round() {
  std::vector<Joiner*> ring;
  for (auto& [id, joiner] : pending_) {
    if (gate_of(joiner) == Gate::kReady && joiner.join.health != HealthMode::kOff &&
        has_addresses(joiner.verdict))
      ring.push_back(&joiner);
  }
  const bool all_pinged = std::all_of(ring.begin(), ring.end(),
                                      [&](const Joiner* j) { return pinged_.contains(j->id); });
  if (ring.size() < 2 || all_pinged) return probe_or_start_round();
  // In node-rank order where ranks were given, else by host: the ring the messages name.
  std::sort(ring.begin(), ring.end(), [](const Joiner* a, const Joiner* b) {
    return std::tuple(a->join.node_rank.value_or(INT_MAX), a->join.node.host, a->arrival) <
           std::tuple(b->join.node_rank.value_or(INT_MAX), b->join.node.host, b->arrival);
  });
  PingRun run{++ping_runs_, {}, {}, {}};
  for (Joiner* joiner : ring) {
    joiner->pings.reset();
    run.nodes.push_back(joiner->id);
    run.ping_nodes.push_back({joiner_label(*joiner), joiner->verdict->device_ips});
  }
  run.plans = plan_device_pings(run.ping_nodes);
  std::vector<Outgoing> out;
  for (size_t i = 0; i < ring.size(); ++i) {
    // A node with nothing to ping still answers (empty), so the round waits for no one twice.
    out.push_back(Outgoing{{run.nodes[i]}, PingRequest{run.id, run.plans[i]}, false});
  }
  ping_run_ = std::move(run);
  return out;
}

std::vector<Outgoing> RendezvousState::on_ping_report(ClientId from, const PingReport& report) {
  if (member_of(from) != nullptr) return {};  // the round formed without waiting for it
  const auto joiner = pending_.find(from);
  if (joiner == pending_.end()) {
    clients_.erase(from);
    return {reject(from, "protocol_order", "'ping_report' from an agent that has not joined")};
  }
  if (!ping_run_ || ping_run_->id != report.run) return {};  // an older run's late answer
  joiner->second.pings = report.results;
  if (phase_ != Phase::kJoining) return {};
  return maybe_start_round();
}

std::optional<std::vector<Outgoing>> RendezvousState::continue_pings() {
  if (!ping_run_) return std::nullopt;
  bool answered = true;
  for (const ClientId id : ping_run_->nodes) {
    const auto joiner = pending_.find(id);
    if (joiner == pending_.end()) {
      ping_run_.reset();  // one left: the ring is another one now, pinged afresh
      return std::nullopt;
    }
    answered = answered && joiner->second.pings.has_value();
  }
  if (!answered) return std::vector<Outgoing>{};
  return finish_pings();
}

std::vector<Outgoing> RendezvousState::finish_pings() {
  PingRun run = std::move(*ping_run_);
  ping_run_.reset();
  std::vector<std::vector<PingResult>> results;
  for (const ClientId id : run.nodes) results.push_back(std::move(*pending_.at(id).pings));
  const auto findings = judge_device_pings(run.ping_nodes, run.plans, results);
  std::vector<Outgoing> out;
  pinged_.clear();
  for (size_t i = 0; i < run.nodes.size(); ++i) {
    Joiner& joiner = pending_.at(run.nodes[i]);
    joiner.pings.reset();
    pinged_.insert(joiner.id);
    std::vector<HealthFinding> told = findings[i];
    if (told.size() > Limits::kMaxPingFindings) told.resize(Limits::kMaxPingFindings);
    for (HealthFinding& finding : told) {
      if (finding.detail.size() > kMaxSentText) finding.detail.resize(kMaxSentText);
      if (finding.fix.size() > kMaxSentText) finding.fix.resize(kMaxSentText);
    }
    NodeVerdict& verdict = *joiner.verdict;
    verdict.findings.insert(verdict.findings.end(), told.begin(), told.end());
    // Within what a verdict may carry on the wire (status answers), worst first.
    if (verdict.findings.size() > kMaxSentFindings) verdict = compact(verdict);
    out.push_back(Outgoing{{joiner.id}, PingVerdict{std::move(told)}, false});
  }
  std::vector<Outgoing> next = maybe_start_round();
  out.insert(out.end(), std::make_move_iterator(next.begin()), std::make_move_iterator(next.end()));
  return out;
}

}  // namespace npu_run::rdzv
