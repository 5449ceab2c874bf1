// libFuzzer target: the rendezvous state machine driven by random sequences of agents' messages,
// disconnects and clock ticks. Invariants checked on everything it sends: every assignment of a
// round gives node ranks 0..N-1 exactly once, with N within --nnodes MIN:MAX, one world size that
// is the sum of the nodes' workers, and rank offsets that are the running sum in node-rank order;
// replies only go to agents that exist; exit codes are 0..255; nothing is assigned after the end.
// Joins gate on their health or not, and verdicts (passed, failed, with differing TLS switches
// and settings, some with device addresses that start ping runs) and ping answers (current or
// stale, reached or not) arrive at any time.
#include <fuzzer/FuzzedDataProvider.h>

#include <cstdlib>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "rendezvous/protocol/auth.hpp"
#include "rendezvous/state/state.hpp"

using namespace npu_run::rdzv;

namespace {

void require(bool ok) {
  if (!ok) std::abort();
}

constexpr ClientId kClients = 6;
constexpr const char* kToken = "fuzz-token";
const std::string kAgentNonce(64, 'a');

void check_assignments(const std::vector<Outgoing>& out, const JobSettings& s) {
  std::map<uint64_t, std::vector<const Assigned*>> by_round;
  std::set<ClientId> seated;
  std::set<ClientId> standing_by;
  for (const Outgoing& o : out) {
    require(!o.to.empty() || std::holds_alternative<ErrorReply>(o.message));
    for (ClientId id : o.to) require(id >= 1 && id <= kClients);
    // A spare holds no seat; a dismissed agent's connection ends.
    if (std::holds_alternative<Assigned>(o.message)) seated.insert(o.to.begin(), o.to.end());
    if (std::holds_alternative<Standby>(o.message)) standing_by.insert(o.to.begin(), o.to.end());
    if (std::holds_alternative<Dismissed>(o.message)) require(o.close_after);
    if (const auto* d = std::get_if<Decision>(&o.message))
      require(d->exit_code >= 0 && d->exit_code <= 255);
    if (const auto* a = std::get_if<Assigned>(&o.message)) by_round[a->round].push_back(a);
  }
  for (const auto& [round, assigned] : by_round) {
    const Assigned& first = *assigned.front();
    require(first.nnodes >= s.min_nodes && first.nnodes <= s.max_nodes);
    require(static_cast<int>(assigned.size()) == first.nnodes);
    std::set<int> ranks;
    for (const Assigned* a : assigned) {
      require(a->nnodes == first.nnodes && a->world_size == first.world_size);
      require(ranks.insert(a->node_rank).second);
      require(static_cast<int>(a->peers.size()) == a->nnodes);
      int offset = 0;
      for (size_t i = 0; i < a->peers.size(); ++i) {
        require(a->peers[i].node_rank == static_cast<int>(i));
        require(a->peers[i].rank_offset == offset);
        offset += a->peers[i].node.nproc;
      }
      require(offset == a->world_size);
      require(a->rank_offset == a->peers[a->node_rank].rank_offset);
    }
    require(*ranks.begin() == 0 && *ranks.rbegin() == first.nnodes - 1);
  }
  for (ClientId id : standing_by) require(!seated.contains(id));
}

JobSettings settings_from(FuzzedDataProvider& in) {
  JobSettings s;
  s.run_id = "fuzz";
  s.min_nodes = in.ConsumeIntegralInRange(1, 4);
  s.max_nodes = in.ConsumeIntegralInRange(s.min_nodes, 4);
  s.max_restarts = in.ConsumeIntegralInRange(0, 2);
  if (in.ConsumeBool()) s.token = kToken;
  s.heartbeat_timeout = std::chrono::seconds(30);
  s.last_call = std::chrono::seconds(in.ConsumeIntegralInRange(0, 5));
  s.join_timeout = std::chrono::seconds(120);
  s.strict_consistency = in.ConsumeBool();
  s.spares = in.ConsumeIntegralInRange(0, 2);
  if (in.ConsumeBool()) s.ledger["h3"] = "lost at some time";
  return s;
}

Join join_from(FuzzedDataProvider& in, ClientId from, const JobSettings& s) {
  Join j;
  j.node.host = "h" + std::to_string(in.ConsumeIntegralInRange(0, 3));
  j.node.addr = "10.0.0." + std::to_string(from);
  j.node.nproc = in.ConsumeIntegralInRange(1, 3);
  for (int i = 0; i < j.node.nproc; ++i) j.node.devices.push_back(i);
  j.node.worker_port = 40000;
  if (in.ConsumeBool()) j.node_rank = in.ConsumeIntegralInRange(0, s.max_nodes + s.spares);
  j.spares = in.ConsumeIntegralInRange(0, 8) == 0 ? s.spares + 1 : s.spares;
  j.affinity = in.ConsumeBool() ? "rack1" : "";
  j.min_nodes = in.ConsumeBool() ? s.min_nodes : 1;
  j.max_nodes = s.max_nodes;
  j.max_restarts = s.max_restarts;
  j.want_peers = true;
  j.health = static_cast<npu_run::HealthMode>(in.ConsumeIntegralInRange(0, 2));
  return j;
}

Report report_from(FuzzedDataProvider& in, uint64_t current_round) {
  Report r;
  r.round = in.ConsumeBool() ? current_round : in.ConsumeIntegral<uint8_t>();
  r.outcome = static_cast<Outcome>(in.ConsumeIntegralInRange(0, 2));
  if (r.outcome != Outcome::kSucceeded) {
    FailureReport f;
    f.host = "h";
    f.exit_code = in.ConsumeIntegralInRange(0, 255);
    f.time_ms = in.ConsumeIntegralInRange<int64_t>(0, 1000);
    // What the restart classification reads: a fault, the same exception again, early.
    if (in.ConsumeBool()) f.evidence.fault = "HCCS link error between devices: x";
    if (in.ConsumeBool()) f.evidence.exception = in.ConsumeBool() ? "ValueError" : "ImportError";
    f.evidence.frame = in.ConsumeBool() ? "train.py:88 in step" : "";
    f.evidence.early = in.ConsumeBool();
    f.evidence.oom = in.ConsumeIntegralInRange(0, 8) == 0;
    r.failure = f;
  }
  if (r.outcome == Outcome::kStopped && in.ConsumeBool()) {
    r.stop_signal = 15;
    r.leaving = in.ConsumeBool();
  }
  r.fatal = in.ConsumeBool();
  return r;
}

// A health verdict: passed or failed, with a TLS switch and a setting that may differ.
HealthReport health_from(FuzzedDataProvider& in) {
  HealthReport h;
  h.verdict.host = "h";
  h.verdict.tls_switch[0] = in.ConsumeIntegralInRange(0, 1);
  h.verdict.settings["HCCL_BUFFSIZE"] = in.ConsumeBool() ? "200" : "400";
  if (in.ConsumeBool()) {
    h.verdict.findings.push_back(
        {"link", 0, npu_run::HealthStatus::kFail, "link status: DOWN", ""});
  }
  // Device addresses make the rendezvous ask for device-plane pings before the round.
  if (in.ConsumeBool()) h.verdict.device_ips = {{0, "10.0.0.10"}, {1, "10.0.0.11"}};
  return h;
}

// Answers to a ping run (the current one or a stale one), reached or not.
PingReport pings_from(FuzzedDataProvider& in) {
  PingReport p;
  p.run = in.ConsumeIntegralInRange<uint64_t>(0, 4);
  const int answers = in.ConsumeIntegralInRange(0, 3);
  for (int i = 0; i < answers; ++i) {
    p.results.push_back(
        {in.ConsumeIntegralInRange(0, 1), "10.0.0.1" + std::to_string(i % 2),
         in.ConsumeBool() ? npu_run::PingAnswer::kReached : npu_run::PingAnswer::kUnreached,
         "recv time out"});
  }
  return p;
}

// One step of the fuzzed sequence: a message from one client, a disconnect or a clock tick.
struct Driver {
  FuzzedDataProvider& in;
  const JobSettings& s;
  RendezvousState& state;
  Now& now;
  std::map<ClientId, std::string> challenges;  // the nonce each client was challenged with

  std::vector<Outgoing> step() {
    const ClientId from = in.ConsumeIntegralInRange<ClientId>(1, kClients);
    switch (in.ConsumeIntegralInRange(0, 8)) {
      case 0:
        return state.on_message(
            from, Hello{kMagic, kProtocolVersion, "fuzz", in.ConsumeBool() ? kAgentNonce : ""},
            now);
      case 1: {
        const std::string& nonce = challenges[from];
        const bool honest = in.ConsumeBool();
        return state.on_message(
            from, Auth{agent_proof(honest ? kToken : "guess", "fuzz", nonce, kAgentNonce)}, now);
      }
      case 2:
        return state.on_message(from, join_from(in, from, s), now);
      case 3:
        return state.on_message(from, Heartbeat{}, now);
      case 4:
        return state.on_message(from, report_from(in, state.round()), now);
      case 5:
        return state.on_disconnect(from, now);
      case 6:
        return state.on_message(from, health_from(in), now);
      case 7:
        return state.on_message(from, pings_from(in), now);
      default:
        now = now + std::chrono::milliseconds(in.ConsumeIntegralInRange(0, 60'000));
        return state.on_tick(now);
    }
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  const JobSettings s = settings_from(in);
  Now now{Clock::time_point{}, 1'700'000'000'000};
  RendezvousState state(s, now);
  int nonces = 0;
  state.set_nonce_source([&] { return "nonce-" + std::to_string(++nonces); });
  Driver driver{in, s, state, now, {}};
  bool finished = false;
  while (in.remaining_bytes() > 0) {
    const std::vector<Outgoing> out = driver.step();
    for (const Outgoing& o : out) {
      if (const auto* c = std::get_if<Challenge>(&o.message))
        driver.challenges[o.to.front()] = c->nonce;
      if (finished) require(!std::holds_alternative<Assigned>(o.message));
    }
    check_assignments(out, s);
    finished = finished || state.phase() == RendezvousState::Phase::kFinished;
  }
  return 0;
}
