// The rendezvous state machine driven directly, as the unit tests of rendezvous/state/state.hpp do:
// a job's settings, its nodes, and a driver that greets and joins agents and hands back what the
// machine sent (no sockets; the time is passed in).
#pragma once

#include <catch2/catch.hpp>
#include <optional>
#include <string>
#include <vector>

#include "rendezvous/state/state.hpp"
#include "support/outgoing.hpp"

namespace npu_run::testing::rdzv_job {

using namespace npu_run::rdzv;
using namespace std::chrono_literals;

// Simulated time: the steady clock at its epoch, the wall clock at some day in 2023.
inline const Now t0{Clock::time_point{}, 1'700'000'000'000};

inline NodeInfo node(const std::string& host, int nproc = 2, int port = 40000) {
  NodeInfo n;
  n.host = host;
  n.addr = "10.0.0." + std::to_string(host.size());
  n.nproc = nproc;
  for (int i = 0; i < nproc; ++i) n.devices.push_back(i);
  n.worker_port = port;
  return n;
}

inline JobSettings settings(int nodes, int max_restarts = 0) {
  JobSettings s;
  s.run_id = "job";
  s.min_nodes = s.max_nodes = nodes;
  s.max_restarts = max_restarts;
  s.heartbeat_timeout = 30s;
  s.progress_interval = 5s;
  s.join_timeout = 900s;
  return s;
}

// A job of `nodes` with `spares` agents beyond them (--spares).
inline JobSettings with_spares(int nodes, int spares, int max_restarts = 0) {
  JobSettings s = settings(nodes, max_restarts);
  s.spares = spares;
  return s;
}

inline Join join_as(const NodeInfo& n, std::optional<int> rank, int nodes, int max_restarts = 0) {
  Join j;
  j.node = n;
  j.node_rank = rank;
  j.min_nodes = j.max_nodes = nodes;
  j.max_restarts = max_restarts;
  return j;
}

// A test driver: greets clients, joins them, and looks into what the machine sent to whom.
struct Job {
  RendezvousState state;
  explicit Job(JobSettings s) : state(std::move(s), t0) {}

  std::vector<Outgoing> send(ClientId id, const ClientMessage& m, Now now = t0) {
    return state.on_message(id, m, now);
  }
  void greet(ClientId id) {
    const auto out = send(id, Hello{kMagic, kProtocolVersion, "job", ""});
    REQUIRE(out.size() == 1);
    REQUIRE(std::holds_alternative<Welcome>(out[0].message));
  }
  std::vector<Outgoing> join(ClientId id, const NodeInfo& n,
                             std::optional<int> rank = std::nullopt) {
    greet(id);
    return send(id, join_as(n, rank, state.settings().max_nodes, state.settings().max_restarts));
  }
};

inline ErrorReply error_to(const std::vector<Outgoing>& out, ClientId id) {
  const ErrorReply* e = message_to<ErrorReply>(out, id);
  REQUIRE(e != nullptr);
  bool closed = false;
  for (const Outgoing& o : out)
    closed = closed || (o.close_after && std::holds_alternative<ErrorReply>(o.message));
  CHECK(closed);  // a rejected agent is disconnected after hearing why
  return *e;
}

inline Report failed(uint64_t round, int rank, int exit_code) {
  FailureReport f;
  f.rank = rank;
  f.exit_code = exit_code;
  f.description = "exit code " + std::to_string(exit_code);
  return Report{round, Outcome::kFailed, f, 0};
}

}  // namespace npu_run::testing::rdzv_job
